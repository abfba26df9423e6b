// What an emitter for one source language provides (Dialect), and the
// language-independent kernel bodies built on it (emit.cpp). Adding a
// language (CUDA C) means one more Dialect.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/recipe.h"

namespace flagos::kernels {

// One kernel parameter in generator.h's launch order.
struct Param {
  enum Kind { Pointer, Meta, Scalar } kind;
  std::string name;         // p0.. (operands), meta, s0..
  flagosDtype_t dtype = 0;  // Pointer: element dtype
  std::string scalar_type;  // Scalar: "double", "float" or the int64 type
  bool read_only = false;   // Pointer: an input
};

// How a fused kernel maps work items (Note [Fused kernels], fused.h).
enum class FusedMode {
  Pointwise,       // one work item per element
  ItemReduction,   // one work item per output row; the reduction is a serial loop
  GroupReduction,  // one work-group per output row, combined in local memory
};

class Dialect {
 public:
  virtual ~Dialect() = default;
  virtual std::string int64Type() const = 0;
  // Pragmas and helper functions every program of this language starts
  // with; @p fp64 says whether double may appear.
  virtual std::string prelude(bool fp64) const = 0;
  // An expression reading element @p index of @p ptr, as float for the
  // 16-bit types and as the storage type otherwise.
  virtual std::string load(flagosDtype_t dtype, const std::string& ptr,
                           const std::string& index) const = 0;
  // A statement writing @p value (already of a type convertible to the
  // element, float for the 16-bit types) to element @p index.
  virtual std::string store(flagosDtype_t dtype, const std::string& ptr, const std::string& index,
                            const std::string& value) const = 0;
  // The kernel's signature and preamble: pointers named after the params,
  // `meta`, the scalars, and the work item `gid` (int64) in scope, valid
  // (checked against meta.work). close() ends what open() began.
  virtual std::string open(const std::string& name, const std::vector<Param>& params) const = 0;
  // Statement leaving the current work item (C: continue, OpenCL: return).
  virtual const char* skip() const = 0;
  virtual std::string close(const std::string& name, const std::vector<Param>& params) const = 0;
  // A statement adding @p value to element @p index atomically ("" where
  // the dialect has none; index.cpp only asks for float32/64, int32/64).
  virtual std::string atomicAdd(flagosDtype_t dtype, const std::string& ptr,
                                const std::string& index, const std::string& value) const {
    return "";
  }
  // File-scope lines a program needs before it uses atomicAdd on @p dtype.
  virtual std::string atomicsPrelude(flagosDtype_t dtype) const { return ""; }
  // Whether scatter-like index kernels run one work item per source element
  // (so only in place, adding with atomicAdd) rather than as one serial
  // work item that first copies self into out (Note [Index kernels]).
  virtual bool parallelScatters() const = 0;
  // Build options of a kernel; @p specialized: its shape is baked in.
  virtual std::string buildOptions(bool specialized) const { return ""; }
  // A program that builds only where the device compiles double-precision
  // code (the generated tier's fp64 probe); "" where double always builds.
  virtual std::string fp64Probe() const { return ""; }

  // Fused kernels (fused.h). Whether FusedMode::GroupReduction exists here.
  virtual bool workGroups() const { return false; }
  // File-scope text before a fused kernel: the prelude, the neutral body's
  // types and macros for @p mode (Note [Fused kernel bodies]).
  // @p group lanes serve one row, @p rows rows share a work-group.
  virtual std::string fusedPrelude(FusedMode mode, int group, int rows, bool fp64) const = 0;
  // The signature and preamble: parameters by name, `xindex` (int64) in
  // scope and below the parameter `xnumel`. fusedClose() ends it.
  virtual std::string fusedOpen(const std::string& name, const std::vector<Param>& params,
                                FusedMode mode) const = 0;
  virtual std::string fusedClose(const std::string& name,
                                 const std::vector<Param>& params) const = 0;
};

std::unique_ptr<Dialect> makeCDialect();
std::unique_ptr<Dialect> makeOpenCLDialect();
// The one place a language name maps to a Dialect (one instance per
// language, never freed); nullptr for a language without an emitter.
const Dialect* dialectFor(const std::string& language);

// Helpers shared by the dialects' preludes: integer and NaN-propagating
// float helpers, written once over the macros FLAGOS_I64/FLAGOS_U64/FLAGOS_FN.
std::string commonHelpers(bool fp64);
// The fused kernels' helpers every dialect shares (fused.cpp): the welford
// and argmax/argmin steps, written once over FLAGOS_FN / FLAGOS_I64.
std::string fusedHelpers(bool fp64);
// The reduction macros of a kernel without work-groups: FLAGOS_RLOOP walks
// the whole row, the group combines are identities (Note [Fused kernel bodies]).
std::string fusedSerialMacros();
// @p text with the word T replaced by @p type and an S that ends a
// lower-case word by @p suffix: helpers written once per float type.
std::string instantiate(const std::string& text, const std::string& type,
                        const std::string& suffix);

// Index / shape kernels (index.cpp): file-scope lines (pragmas) and body.
std::string indexPrelude(const Recipe& recipe, const Signature& sig, const Dialect& dl);
std::string indexBody(const Recipe& recipe, const Signature& sig, const Dialect& dl,
                      const Target& target);
// Window kernels (window.cpp): the body.
std::string windowBody(const Recipe& recipe, const Signature& sig, const Dialect& dl,
                       const Target& target);
// Sort kernels (sort.cpp): the body.
std::string sortBody(const Recipe& recipe, const Signature& sig, const Dialect& dl,
                     const Target& target);

}  // namespace flagos::kernels
