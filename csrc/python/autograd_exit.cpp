// Autograd's device threads drained at interpreter exit (autograd_exit.h).
//
// Note [Autograd threads at exit]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch runs the backward of a device's tensors on one thread per device
// index (autograd's device threads); the caller of backward() waits for the
// graph task's future. The device thread marks that future complete and
// only then, at the end of its loop, drops its own reference to the graph
// task. What it releases there can be tensors Python knows of, and their
// release takes the GIL. So a program whose last statement is a backward
// can reach interpreter finalization while the device thread still holds
// them: the thread taking the GIL is then made to exit by pthread_exit,
// whose unwinding through a noexcept destructor calls std::terminate
// ("terminate called without an active exception", SIGABRT after the work
// was done: Engine::thread_main -> PyEval_AcquireThread -> pthread_exit in
// the backtrace; seen in CI on opencl and reproduced on host under load,
// docs/reliability.md). CPU tensors never meet it: their backward runs on
// the caller's thread.
//
// So at exit, first thing (flagos_torchfl's atexit hook, before Python
// finalizes and before the core's background work stops), every flagos
// device index's thread gets one empty backward: a node that computes
// nothing, fed a zero-size tensor of that device (an allocation of nothing,
// no kernel). A device thread takes a task only after it has finished the
// one before, so when the empty backward completes, the thread let go of
// everything the program's last backward left it; what it holds from the
// empty one is nothing Python knows of. The backward runs on a helper
// thread without the GIL (the device thread may need it for the tensors it
// releases), and the wait is bounded by the exit bound (FLAGOS_EXIT_TIMEOUT):
// a device thread still busy with another thread's long backward is left.
// Nothing happens when autograd never started its device threads.
#include "python/autograd_exit.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>

#include "runtime/backend.h"
#include "runtime/lifecycle.h"

namespace flagos::python {
namespace {

using torch::autograd::Engine;
using torch::autograd::variable_list;

// A backward node that does nothing.
struct ExitBarrier final : torch::autograd::Node {
  variable_list apply(variable_list&& /*grads*/) override { return {}; }
  std::string name() const override { return "flagos::AutogradExitBarrier"; }
};

// Whether the engine started its device threads (it fills its per-device
// queues then, once): a derived class may name the protected member.
struct EnginePeek : Engine {
  static bool deviceThreadsStarted(Engine& engine) {
    return !(engine.*(&EnginePeek::device_ready_queues_)).empty();
  }
};

// A new node in the engine's pointer type: std::shared_ptr up to torch 2.11,
// c10::intrusive_ptr from 2.13 on.
using NodePtr = decltype(torch::autograd::Edge::function);
template <class Ptr = NodePtr>
Ptr newBarrier() {
  if constexpr (std::is_same_v<Ptr, std::shared_ptr<torch::autograd::Node>>) {
    return std::make_shared<ExitBarrier>();
  } else {
    return c10::make_intrusive<ExitBarrier>();
  }
}

// One empty backward on @p device's autograd thread; returns when it ran.
void emptyBackward(c10::DeviceIndex device) {
  const NodePtr node = newBarrier();
  const at::Tensor grad =
      at::empty({0}, at::TensorOptions().device(c10::Device(c10::DeviceType::PrivateUse1, device)));
  node->add_input_metadata(grad);
  Engine::get_default_engine().execute({torch::autograd::Edge(node, 0)}, {grad},
                                       /*keep_graph=*/false, /*create_graph=*/false,
                                       /*accumulate_grad=*/true, /*outputs=*/{});
}

}  // namespace

bool drainAutogradDeviceThreads(std::chrono::milliseconds bound) noexcept {
  try {
    if (inForkedChild() || !isInitialized() ||
        !EnginePeek::deviceThreadsStarted(Engine::get_default_engine())) {
      return true;
    }
    struct Done {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
    };
    auto state = std::make_shared<Done>();
    const c10::DeviceIndex devices = deviceCount();
    std::thread([state, devices] {
      for (c10::DeviceIndex d = 0; d < devices; ++d) {
        try {
          emptyBackward(d);
        } catch (...) {  // a broken device: nothing more to wait for on it
        }
      }
      {
        const std::lock_guard<std::mutex> lock(state->mu);
        state->done = true;
      }
      state->cv.notify_all();
    }).detach();  // left running only past the bound, when the process ends anyway
    std::unique_lock<std::mutex> lock(state->mu);
    return state->cv.wait_for(lock, bound, [&] { return state->done; });
  } catch (...) {
    return false;
  }
}

}  // namespace flagos::python
