// The linear-algebra library slot (include/flagos/linalg.h) over the LAPACK
// inside OpenBLAS (BSD-3-Clause; Debian's libopenblas, already linked for
// GEMM).
//
// Note [Host LAPACK]
// ~~~~~~~~~~~~~~~~~~
// Each member checks its arguments at once, then enqueues one task that
// walks the batch and calls the LAPACK routine of the dtype on each matrix
// in place: the slot's layout is LAPACK's own, so nothing is copied. The
// Fortran routines are declared here (Debian ships no lapack.h with
// OpenBLAS) with LP64 integers, as Debian builds OpenBLAS, and the hidden
// length argument gfortran appends for each character argument. Workspace
// is asked for once per task (lwork = -1) and lives in the task. SVD is
// gesdd (divide and conquer), the driver torch.linalg.svd takes on CPU by
// default; the symmetric eigensolver is syevd; geev writes LAPACK's real
// eigenvector pairs as the slot's complex columns. float32 and float64 only:
// complex dtypes are declined (FLAGOS_ERROR_NOT_SUPPORTED) and take the host
// tier, as do sizes past LAPACK's 32-bit integers.
#include <cblas.h>  // OPENBLAS_VERSION

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "host.h"
#include "kernels/kernels.h"

extern "C" {
// LAPACK / BLAS (Fortran calling convention: everything by address).
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda,
             const int* ipiv, float* b, const int* ldb, int* info, size_t);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda,
             const int* ipiv, double* b, const int* ldb, int* info, size_t);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void strsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m,
            const int* n, const float* alpha, const float* a, const int* lda, float* b,
            const int* ldb, size_t, size_t, size_t, size_t);
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m,
            const int* n, const double* alpha, const double* a, const int* lda, double* b,
            const int* ldb, size_t, size_t, size_t, size_t);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
             float* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
void sormqr_(const char* side, const char* trans, const int* m, const int* n, const int* k,
             const float* a, const int* lda, const float* tau, float* c, const int* ldc,
             float* work, const int* lwork, int* info, size_t, size_t);
void dormqr_(const char* side, const char* trans, const int* m, const int* n, const int* k,
             const double* a, const int* lda, const double* tau, double* c, const int* ldc,
             double* work, const int* lwork, int* info, size_t, size_t);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
             int* iwork, int* info, size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info, size_t);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void sgeev_(const char* jobvl, const char* jobvr, const int* n, float* a, const int* lda, float* wr,
            float* wi, float* vl, const int* ldvl, float* vr, const int* ldvr, float* work,
            const int* lwork, int* info, size_t, size_t);
void dgeev_(const char* jobvl, const char* jobvr, const int* n, double* a, const int* lda,
            double* wr, double* wi, double* vl, const int* ldvl, double* vr, const int* ldvr,
            double* work, const int* lwork, int* info, size_t, size_t);
void ssytrf_(const char* uplo, const int* n, float* a, const int* lda, int* ipiv, float* work,
             const int* lwork, int* info, size_t);
void dsytrf_(const char* uplo, const int* n, double* a, const int* lda, int* ipiv, double* work,
             const int* lwork, int* info, size_t);
void ssytrs_(const char* uplo, const int* n, const int* nrhs, const float* a, const int* lda,
             const int* ipiv, float* b, const int* ldb, int* info, size_t);
void dsytrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda,
             const int* ipiv, double* b, const int* ldb, int* info, size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
}

namespace flagos_host {
namespace {

// One overload per routine and type, so the tasks below are templates.
void getrf(int m, int n, float* a, int lda, int* ipiv, int* info) {
  sgetrf_(&m, &n, a, &lda, ipiv, info);
}
void getrf(int m, int n, double* a, int lda, int* ipiv, int* info) {
  dgetrf_(&m, &n, a, &lda, ipiv, info);
}
void getrs(char t, int n, int nrhs, const float* a, int lda, const int* ipiv, float* b, int ldb,
           int* info) {
  sgetrs_(&t, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}
void getrs(char t, int n, int nrhs, const double* a, int lda, const int* ipiv, double* b, int ldb,
           int* info) {
  dgetrs_(&t, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}
void potrf(char uplo, int n, float* a, int lda, int* info) {
  spotrf_(&uplo, &n, a, &lda, info, 1);
}
void potrf(char uplo, int n, double* a, int lda, int* info) {
  dpotrf_(&uplo, &n, a, &lda, info, 1);
}
void trsm(char side, char uplo, char t, char diag, int m, int n, const float* a, int lda, float* b,
          int ldb) {
  const float one = 1;
  strsm_(&side, &uplo, &t, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);
}
void trsm(char side, char uplo, char t, char diag, int m, int n, const double* a, int lda,
          double* b, int ldb) {
  const double one = 1;
  dtrsm_(&side, &uplo, &t, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);
}
void geqrf(int m, int n, float* a, int lda, float* tau, float* work, int lwork, int* info) {
  sgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
void geqrf(int m, int n, double* a, int lda, double* tau, double* work, int lwork, int* info) {
  dgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
void orgqr(int m, int n, int k, float* a, int lda, const float* tau, float* work, int lwork,
           int* info) {
  sorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
void orgqr(int m, int n, int k, double* a, int lda, const double* tau, double* work, int lwork,
           int* info) {
  dorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
void ormqr(char side, char t, int m, int n, int k, const float* a, int lda, const float* tau,
           float* c, int ldc, float* work, int lwork, int* info) {
  sormqr_(&side, &t, &m, &n, &k, a, &lda, tau, c, &ldc, work, &lwork, info, 1, 1);
}
void ormqr(char side, char t, int m, int n, int k, const double* a, int lda, const double* tau,
           double* c, int ldc, double* work, int lwork, int* info) {
  dormqr_(&side, &t, &m, &n, &k, a, &lda, tau, c, &ldc, work, &lwork, info, 1, 1);
}
void gesdd(char jobz, int m, int n, float* a, int lda, float* s, float* u, int ldu, float* vt,
           int ldvt, float* work, int lwork, int* iwork, int* info) {
  sgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
}
void gesdd(char jobz, int m, int n, double* a, int lda, double* s, double* u, int ldu, double* vt,
           int ldvt, double* work, int lwork, int* iwork, int* info) {
  dgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
}
void syevd(char jobz, char uplo, int n, float* a, int lda, float* w, float* work, int lwork,
           int* iwork, int liwork, int* info) {
  ssyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
}
void syevd(char jobz, char uplo, int n, double* a, int lda, double* w, double* work, int lwork,
           int* iwork, int liwork, int* info) {
  dsyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
}

void geev(char jobvr, int n, float* a, int lda, float* wr, float* wi, float* vr, int ldvr,
          float* work, int lwork, int* info) {
  const char no = 'N';
  const int one = 1;
  sgeev_(&no, &jobvr, &n, a, &lda, wr, wi, nullptr, &one, vr, &ldvr, work, &lwork, info, 1, 1);
}
void geev(char jobvr, int n, double* a, int lda, double* wr, double* wi, double* vr, int ldvr,
          double* work, int lwork, int* info) {
  const char no = 'N';
  const int one = 1;
  dgeev_(&no, &jobvr, &n, a, &lda, wr, wi, nullptr, &one, vr, &ldvr, work, &lwork, info, 1, 1);
}
void sytrf(char uplo, int n, float* a, int lda, int* ipiv, float* work, int lwork, int* info) {
  ssytrf_(&uplo, &n, a, &lda, ipiv, work, &lwork, info, 1);
}
void sytrf(char uplo, int n, double* a, int lda, int* ipiv, double* work, int lwork, int* info) {
  dsytrf_(&uplo, &n, a, &lda, ipiv, work, &lwork, info, 1);
}
void sytrs(char uplo, int n, int nrhs, const float* a, int lda, const int* ipiv, float* b, int ldb,
           int* info) {
  ssytrs_(&uplo, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}
void sytrs(char uplo, int n, int nrhs, const double* a, int lda, const int* ipiv, double* b,
           int ldb, int* info) {
  dsytrs_(&uplo, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}

// The optimal workspace LAPACK answered to lwork = -1 (it writes it as a real).
template <class T>
int workSize(T answer) {
  return std::max(1, static_cast<int>(answer));
}

// Argument checks shared by every member (linalg.h's layout rules); each
// records the message and returns false.
class Check {
 public:
  explicit Check(const char* call) : call_(call) {}

  bool dtype(flagosDtype_t t) {
    if (t == FLAGOS_DTYPE_FLOAT32 || t == FLAGOS_DTYPE_FLOAT64) return true;
    status_ = FLAGOS_ERROR_NOT_SUPPORTED;
    return failed("dtype %d (float32 and float64 only)", static_cast<int>(t));
  }
  // Sizes >= 1 that LAPACK's 32-bit integers hold.
  bool sizes(std::initializer_list<int64_t> sizes) {
    for (int64_t s : sizes) {
      if (s < 1) return failed("size %lld (every size is >= 1)", static_cast<long long>(s));
      if (s > INT_MAX) {
        status_ = FLAGOS_ERROR_NOT_SUPPORTED;
        return failed("size %lld past LAPACK's 32-bit integers", static_cast<long long>(s));
      }
    }
    return true;
  }
  bool matrix(const char* name, const flagosLinalgArray& a, int64_t batch, int64_t rows,
              int64_t cols) {
    if (a.data == nullptr) return failed("NULL %s", name);
    if (a.ld < std::max<int64_t>(1, rows) || a.ld > INT_MAX)
      return failed("%s: ld %lld for %lld rows", name, static_cast<long long>(a.ld),
                    static_cast<long long>(rows));
    if (batch > 1 && a.stride < a.ld * cols)
      return failed("%s: stride %lld below ld x cols", name, static_cast<long long>(a.stride));
    return true;
  }
  bool vector(const char* name, const flagosLinalgArray& v, int64_t batch, int64_t len) {
    if (v.data == nullptr) return failed("NULL %s", name);
    if (batch > 1 && v.stride < len)
      return failed("%s: stride %lld below its length %lld", name, static_cast<long long>(v.stride),
                    static_cast<long long>(len));
    return true;
  }
  bool pointer(const char* name, const void* p) { return p != nullptr || failed("NULL %s", name); }
  bool op(flagosLinalgOp_t op) {
    return (op >= FLAGOS_LINALG_OP_N && op <= FLAGOS_LINALG_OP_C) ||
           failed("op %d", static_cast<int>(op));
  }
  flagosStatus_t status() const { return status_; }

 private:
  template <class... Args>
  bool failed(const char* format, Args... args) {
    char what[256];
    std::snprintf(what, sizeof(what), format, args...);
    fail(status_, "host linalg %s: %s", call_, what);
    return false;
  }
  const char* call_;
  flagosStatus_t status_ = FLAGOS_ERROR_INVALID_ARGUMENT;
};

char opChar(flagosLinalgOp_t op) {
  return op == FLAGOS_LINALG_OP_N ? 'N' : 'T';
}
char uploChar(int32_t upper) {
  return upper ? 'U' : 'L';
}

template <class T>
T* at(const flagosLinalgArray& a, int64_t i) {
  return static_cast<T*>(a.data) + i * a.stride;
}
int32_t* pivotsAt(const flagosLinalgArray& p, int64_t i) {
  return static_cast<int32_t*>(p.data) + i * p.stride;
}
int ld(const flagosLinalgArray& a) {
  return static_cast<int>(a.ld);
}

// Enqueues @p work(T{}) for the dtype (already checked).
template <class Work>
flagosStatus_t enqueue(flagosStream_t stream, flagosDtype_t dtype, int64_t cost, Work work) {
  if (dtype == FLAGOS_DTYPE_FLOAT32)
    return kernels::submit(
        stream, [work] { work(float{}); }, cost);
  return kernels::submit(
      stream, [work] { work(double{}); }, cost);
}

int64_t bytes(flagosDtype_t dtype, int64_t elements) {
  return elements * (dtype == FLAGOS_DTYPE_FLOAT32 ? 4 : 8);
}

flagosStatus_t lGetrf(flagosStream_t stream, flagosDtype_t dtype, int64_t batch, int64_t m,
                      int64_t n, flagosLinalgArray a, flagosLinalgArray ipiv, int32_t* info) {
  return guard("linalg getrf", [&]() -> flagosStatus_t {
    Check c("getrf");
    if (!c.dtype(dtype) || !c.sizes({batch, m, n}) || !c.matrix("a", a, batch, m, n) ||
        !c.vector("ipiv", ipiv, batch, std::min(m, n)) || !c.pointer("info", info))
      return c.status();
    return enqueue(stream, dtype, bytes(dtype, batch * m * n), [=](auto zero) {
      using T = decltype(zero);
      for (int64_t i = 0; i < batch; ++i)
        getrf(static_cast<int>(m), static_cast<int>(n), at<T>(a, i), ld(a), pivotsAt(ipiv, i),
              info + i);
    });
  });
}

flagosStatus_t lGetrs(flagosStream_t stream, flagosDtype_t dtype, flagosLinalgOp_t op,
                      int64_t batch, int64_t n, int64_t nrhs, flagosLinalgArray a,
                      flagosLinalgArray ipiv, flagosLinalgArray b) {
  return guard("linalg getrs", [&]() -> flagosStatus_t {
    Check c("getrs");
    if (!c.dtype(dtype) || !c.op(op) || !c.sizes({batch, n, nrhs}) ||
        !c.matrix("a", a, batch, n, n) || !c.vector("ipiv", ipiv, batch, n) ||
        !c.matrix("b", b, batch, n, nrhs))
      return c.status();
    return enqueue(stream, dtype, bytes(dtype, batch * n * (n + nrhs)), [=](auto zero) {
      using T = decltype(zero);
      int info = 0;
      for (int64_t i = 0; i < batch; ++i)
        getrs(opChar(op), static_cast<int>(n), static_cast<int>(nrhs), at<T>(a, i), ld(a),
              pivotsAt(ipiv, i), at<T>(b, i), ld(b), &info);
    });
  });
}

flagosStatus_t lPotrf(flagosStream_t stream, flagosDtype_t dtype, int32_t upper, int64_t batch,
                      int64_t n, flagosLinalgArray a, int32_t* info) {
  return guard("linalg potrf", [&]() -> flagosStatus_t {
    Check c("potrf");
    if (!c.dtype(dtype) || !c.sizes({batch, n}) || !c.matrix("a", a, batch, n, n) ||
        !c.pointer("info", info))
      return c.status();
    return enqueue(stream, dtype, bytes(dtype, batch * n * n), [=](auto zero) {
      using T = decltype(zero);
      for (int64_t i = 0; i < batch; ++i)
        potrf(uploChar(upper), static_cast<int>(n), at<T>(a, i), ld(a), info + i);
    });
  });
}

flagosStatus_t lTrsm(flagosStream_t stream, flagosDtype_t dtype, int32_t right, int32_t upper,
                     flagosLinalgOp_t op, int32_t unit, int64_t batch, int64_t m, int64_t n,
                     flagosLinalgArray a, flagosLinalgArray b) {
  return guard("linalg trsm", [&]() -> flagosStatus_t {
    Check c("trsm");
    const int64_t k = right ? n : m;
    if (!c.dtype(dtype) || !c.op(op) || !c.sizes({batch, m, n}) || !c.matrix("a", a, batch, k, k) ||
        !c.matrix("b", b, batch, m, n))
      return c.status();
    return enqueue(stream, dtype, bytes(dtype, batch * (k * k + m * n)), [=](auto zero) {
      using T = decltype(zero);
      for (int64_t i = 0; i < batch; ++i)
        trsm(right ? 'R' : 'L', uploChar(upper), opChar(op), unit ? 'U' : 'N', static_cast<int>(m),
             static_cast<int>(n), at<T>(a, i), ld(a), at<T>(b, i), ld(b));
    });
  });
}

flagosStatus_t lGeqrf(flagosStream_t stream, flagosDtype_t dtype, int64_t batch, int64_t m,
                      int64_t n, flagosLinalgArray a, flagosLinalgArray tau) {
  return guard("linalg geqrf", [&]() -> flagosStatus_t {
    Check c("geqrf");
    if (!c.dtype(dtype) || !c.sizes({batch, m, n}) || !c.matrix("a", a, batch, m, n) ||
        !c.vector("tau", tau, batch, std::min(m, n)))
      return c.status();
    return enqueue(stream, dtype, bytes(dtype, batch * m * n), [=](auto zero) {
      using T = decltype(zero);
      const int mi = static_cast<int>(m), ni = static_cast<int>(n);
      int info = 0;
      T query = 0;
      geqrf(mi, ni, at<T>(a, 0), ld(a), at<T>(tau, 0), &query, -1, &info);
      std::vector<T> work(workSize(query));
      for (int64_t i = 0; i < batch; ++i)
        geqrf(mi, ni, at<T>(a, i), ld(a), at<T>(tau, i), work.data(), static_cast<int>(work.size()),
              &info);
    });
  });
}

flagosStatus_t lOrgqr(flagosStream_t stream, flagosDtype_t dtype, int64_t batch, int64_t m,
                      int64_t n, int64_t k, flagosLinalgArray a, flagosLinalgArray tau) {
  return guard("linalg orgqr", [&]() -> flagosStatus_t {
    Check c("orgqr");
    if (!c.dtype(dtype) || !c.sizes({batch, m, n, k}) || !c.matrix("a", a, batch, m, n) ||
        !c.vector("tau", tau, batch, k))
      return c.status();
    if (n > m || k > n)
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host linalg orgqr: m >= n >= k");
    return enqueue(stream, dtype, bytes(dtype, batch * m * n), [=](auto zero) {
      using T = decltype(zero);
      const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
      int info = 0;
      T query = 0;
      orgqr(mi, ni, ki, at<T>(a, 0), ld(a), at<T>(tau, 0), &query, -1, &info);
      std::vector<T> work(workSize(query));
      for (int64_t i = 0; i < batch; ++i)
        orgqr(mi, ni, ki, at<T>(a, i), ld(a), at<T>(tau, i), work.data(),
              static_cast<int>(work.size()), &info);
    });
  });
}

flagosStatus_t lOrmqr(flagosStream_t stream, flagosDtype_t dtype, int32_t right,
                      flagosLinalgOp_t op, int64_t batch, int64_t m, int64_t n, int64_t k,
                      flagosLinalgArray a, flagosLinalgArray tau, flagosLinalgArray cm) {
  return guard("linalg ormqr", [&]() -> flagosStatus_t {
    Check c("ormqr");
    const int64_t rows = right ? n : m;
    if (!c.dtype(dtype) || !c.op(op) || !c.sizes({batch, m, n, k}) ||
        !c.matrix("a", a, batch, rows, k) || !c.vector("tau", tau, batch, k) ||
        !c.matrix("c", cm, batch, m, n))
      return c.status();
    if (k > rows) return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host linalg ormqr: k > rows of Q");
    return enqueue(stream, dtype, bytes(dtype, batch * (rows * k + m * n)), [=](auto zero) {
      using T = decltype(zero);
      const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
      const char side = right ? 'R' : 'L', t = opChar(op);
      int info = 0;
      T query = 0;
      ormqr(side, t, mi, ni, ki, at<T>(a, 0), ld(a), at<T>(tau, 0), at<T>(cm, 0), ld(cm), &query,
            -1, &info);
      std::vector<T> work(workSize(query));
      for (int64_t i = 0; i < batch; ++i)
        ormqr(side, t, mi, ni, ki, at<T>(a, i), ld(a), at<T>(tau, i), at<T>(cm, i), ld(cm),
              work.data(), static_cast<int>(work.size()), &info);
    });
  });
}

flagosStatus_t lGesvd(flagosStream_t stream, flagosDtype_t dtype, flagosLinalgSvdJob_t job,
                      int64_t batch, int64_t m, int64_t n, flagosLinalgArray a, flagosLinalgArray s,
                      flagosLinalgArray u, flagosLinalgArray vh, int32_t* info) {
  return guard("linalg gesvd", [&]() -> flagosStatus_t {
    Check c("gesvd");
    const int64_t k = std::min(m, n);
    const bool full = job == FLAGOS_LINALG_SVD_FULL, vectors = job != FLAGOS_LINALG_SVD_VALUES;
    if (!c.dtype(dtype) || !c.sizes({batch, m, n}) || !c.matrix("a", a, batch, m, n) ||
        !c.vector("s", s, batch, k) || !c.pointer("info", info) ||
        (vectors && (!c.matrix("u", u, batch, m, full ? m : k) ||
                     !c.matrix("vh", vh, batch, full ? n : k, n))))
      return c.status();
    if (job < FLAGOS_LINALG_SVD_VALUES || job > FLAGOS_LINALG_SVD_FULL)
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host linalg gesvd: job %d",
                  static_cast<int>(job));
    return enqueue(stream, dtype, bytes(dtype, batch * m * n * 4), [=](auto zero) {
      using T = decltype(zero);
      const char jobz = full ? 'A' : vectors ? 'S' : 'N';
      const int mi = static_cast<int>(m), ni = static_cast<int>(n);
      const int ldu = vectors ? ld(u) : 1, ldvt = vectors ? ld(vh) : 1;
      std::vector<int> iwork(8 * static_cast<size_t>(k));
      T query = 0;
      gesdd(jobz, mi, ni, at<T>(a, 0), ld(a), at<T>(s, 0), vectors ? at<T>(u, 0) : nullptr, ldu,
            vectors ? at<T>(vh, 0) : nullptr, ldvt, &query, -1, iwork.data(), info);
      std::vector<T> work(workSize(query));
      for (int64_t i = 0; i < batch; ++i)
        gesdd(jobz, mi, ni, at<T>(a, i), ld(a), at<T>(s, i), vectors ? at<T>(u, i) : nullptr, ldu,
              vectors ? at<T>(vh, i) : nullptr, ldvt, work.data(), static_cast<int>(work.size()),
              iwork.data(), info + i);
    });
  });
}

flagosStatus_t lSyevd(flagosStream_t stream, flagosDtype_t dtype, int32_t vectors, int32_t upper,
                      int64_t batch, int64_t n, flagosLinalgArray a, flagosLinalgArray w,
                      int32_t* info) {
  return guard("linalg syevd", [&]() -> flagosStatus_t {
    Check c("syevd");
    if (!c.dtype(dtype) || !c.sizes({batch, n}) || !c.matrix("a", a, batch, n, n) ||
        !c.vector("w", w, batch, n) || !c.pointer("info", info))
      return c.status();
    return enqueue(stream, dtype, bytes(dtype, batch * n * n * 4), [=](auto zero) {
      using T = decltype(zero);
      const char jobz = vectors ? 'V' : 'N', uplo = uploChar(upper);
      const int ni = static_cast<int>(n);
      T query = 0;
      int iquery = 0;
      syevd(jobz, uplo, ni, at<T>(a, 0), ld(a), at<T>(w, 0), &query, -1, &iquery, -1, info);
      std::vector<T> work(workSize(query));
      std::vector<int> iwork(std::max(1, iquery));
      for (int64_t i = 0; i < batch; ++i)
        syevd(jobz, uplo, ni, at<T>(a, i), ld(a), at<T>(w, i), work.data(),
              static_cast<int>(work.size()), iwork.data(), static_cast<int>(iwork.size()),
              info + i);
    });
  });
}

// "LAPACK of OpenBLAS 0.3.21" (the header's version string is padded).
const char* libraryName() {
#ifdef OPENBLAS_VERSION
  static const std::string name = [] {
    std::string v = OPENBLAS_VERSION;
    v.erase(0, v.find_first_not_of(' '));
    v.erase(v.find_last_not_of(' ') + 1);
    return "LAPACK of " + v;
  }();
  return name.c_str();
#else
  return "LAPACK of OpenBLAS";
#endif
}

// geev: LAPACK's real outputs (wr, wi; real eigenvector columns, a
// conjugate pair j, j + 1 stored as its real and imaginary parts) written
// as the slot's complex w and v.
flagosStatus_t lGeev(flagosStream_t stream, flagosDtype_t dtype, int32_t vectors, int64_t batch,
                     int64_t n, flagosLinalgArray a, flagosLinalgArray w, flagosLinalgArray v,
                     int32_t* info) {
  return guard("linalg geev", [&]() -> flagosStatus_t {
    Check c("geev");
    if (!c.dtype(dtype) || !c.sizes({batch, n}) || !c.matrix("a", a, batch, n, n) ||
        !c.vector("w", w, batch, n) || !c.pointer("info", info) ||
        (vectors && !c.matrix("v", v, batch, n, n)))
      return c.status();
    return enqueue(stream, dtype, bytes(dtype, batch * n * n * 4), [=](auto zero) {
      using T = decltype(zero);
      const int ni = static_cast<int>(n);
      const char jobvr = vectors ? 'V' : 'N';
      std::vector<T> wr(n), wi(n), vr(vectors ? n * n : 1);
      T query = 0;
      geev(jobvr, ni, at<T>(a, 0), ld(a), wr.data(), wi.data(), vr.data(), vectors ? ni : 1, &query,
           -1, info);
      std::vector<T> work(workSize(query));
      for (int64_t i = 0; i < batch; ++i) {
        geev(jobvr, ni, at<T>(a, i), ld(a), wr.data(), wi.data(), vr.data(), vectors ? ni : 1,
             work.data(), static_cast<int>(work.size()), info + i);
        T* wc = static_cast<T*>(w.data) + 2 * i * w.stride;
        for (int64_t j = 0; j < n; ++j) {
          wc[2 * j] = wr[j];
          wc[2 * j + 1] = wi[j];
        }
        if (!vectors) continue;
        T* vc = static_cast<T*>(v.data) + 2 * i * v.stride;
        for (int64_t j = 0; j < n; ++j) {
          T* col = vc + 2 * j * v.ld;
          const bool pair = wi[j] != 0 && j + 1 < n;
          for (int64_t r = 0; r < n; ++r) {
            col[2 * r] = vr[j * n + r];
            col[2 * r + 1] = pair ? vr[(j + 1) * n + r] : T(0);
            if (pair) {  // the conjugate column
              col[2 * (v.ld + r)] = vr[j * n + r];
              col[2 * (v.ld + r) + 1] = -vr[(j + 1) * n + r];
            }
          }
          if (pair) ++j;
        }
      }
    });
  });
}

flagosStatus_t lSytrf(flagosStream_t stream, flagosDtype_t dtype, int32_t upper, int64_t batch,
                      int64_t n, flagosLinalgArray a, flagosLinalgArray ipiv, int32_t* info) {
  return guard("linalg sytrf", [&]() -> flagosStatus_t {
    Check c("sytrf");
    if (!c.dtype(dtype) || !c.sizes({batch, n}) || !c.matrix("a", a, batch, n, n) ||
        !c.vector("ipiv", ipiv, batch, n) || !c.pointer("info", info))
      return c.status();
    return enqueue(stream, dtype, bytes(dtype, batch * n * n), [=](auto zero) {
      using T = decltype(zero);
      const int ni = static_cast<int>(n);
      T query = 0;
      sytrf(uploChar(upper), ni, at<T>(a, 0), ld(a), pivotsAt(ipiv, 0), &query, -1, info);
      std::vector<T> work(workSize(query));
      for (int64_t i = 0; i < batch; ++i)
        sytrf(uploChar(upper), ni, at<T>(a, i), ld(a), pivotsAt(ipiv, i), work.data(),
              static_cast<int>(work.size()), info + i);
    });
  });
}

flagosStatus_t lSytrs(flagosStream_t stream, flagosDtype_t dtype, int32_t upper, int64_t batch,
                      int64_t n, int64_t nrhs, flagosLinalgArray a, flagosLinalgArray ipiv,
                      flagosLinalgArray b) {
  return guard("linalg sytrs", [&]() -> flagosStatus_t {
    Check c("sytrs");
    if (!c.dtype(dtype) || !c.sizes({batch, n, nrhs}) || !c.matrix("a", a, batch, n, n) ||
        !c.vector("ipiv", ipiv, batch, n) || !c.matrix("b", b, batch, n, nrhs))
      return c.status();
    return enqueue(stream, dtype, bytes(dtype, batch * n * (n + nrhs)), [=](auto zero) {
      using T = decltype(zero);
      int info = 0;
      for (int64_t i = 0; i < batch; ++i)
        sytrs(uploChar(upper), static_cast<int>(n), static_cast<int>(nrhs), at<T>(a, i), ld(a),
              pivotsAt(ipiv, i), at<T>(b, i), ld(b), &info);
    });
  });
}

}  // namespace

const flagosLinalgTable* linalgTable() {
  static const flagosLinalgTable table = [] {
    flagosLinalgTable t{};
    t.struct_size = sizeof(t);
    t.library = libraryName();
    t.getrf = lGetrf;
    t.getrs = lGetrs;
    t.potrf = lPotrf;
    t.trsm = lTrsm;
    t.geqrf = lGeqrf;
    t.orgqr = lOrgqr;
    t.ormqr = lOrmqr;
    t.gesvd = lGesvd;
    t.syevd = lSyevd;
    t.geev = lGeev;
    t.sytrf = lSytrf;
    t.sytrs = lSytrs;
    return t;
  }();
  return &table;
}

}  // namespace flagos_host
