"""Build: CMake compiles the core extension and the vendor plugins against the
installed torch; setuptools only packages the results.

    pip install --no-build-isolation .        # install
    pip install --no-build-isolation -e .     # develop (outputs land in python/)
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        ext_path = Path(self.get_ext_fullpath(ext.name)).resolve()
        # An editable install builds into a temporary folder and copies back
        # only _C: build straight into the source package instead, so that
        # plugins/ and the paths ctest records stay valid.
        editable = getattr(self, "editable_mode", False) or self.inplace
        out_dir = ROOT / "python" / "flagos_torchfl" if editable else ext_path.parent
        # FLAGOS_BUILD_DIR: one build folder per torch (a folder caches one
        # torch's headers and generated catalog).
        build_dir = Path(os.environ.get("FLAGOS_BUILD_DIR") or ROOT / "build" / "cmake")
        build_dir.mkdir(parents=True, exist_ok=True)
        jobs = os.environ.get("FLAGOS_BUILD_JOBS", "2")
        cfg = [
            "cmake",
            "-S",
            str(ROOT),
            "-B",
            str(build_dir),
            "-G",
            "Ninja",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DFLAGOS_PY_OUTPUT_DIR={out_dir}",
            f"-DFLAGOS_BUILD_TESTS={os.environ.get('FLAGOS_BUILD_TESTS', 'ON')}",
            # Explicit, so an old build folder's cached value cannot linger.
            f"-DFLAGOS_ENABLE_CATALOG={os.environ.get('FLAGOS_ENABLE_CATALOG', 'ON')}",
        ]
        subprocess.check_call(cfg)
        subprocess.check_call(["cmake", "--build", str(build_dir), "-j", jobs])
        if editable:  # where setuptools looks for it before copying it back
            ext_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(out_dir / ext_path.name, ext_path)


setup(
    ext_modules=[Extension("flagos_torchfl._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # include/: the vendor headers behind get_include() (codegen/catalog.cmake).
    package_data={
        "flagos_torchfl": ["plugins/*.so", "include/flagos/*.h", "include/flagos_kit/*.h"]
    },
)
