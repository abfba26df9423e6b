// The strided N-operand iterator shared by the elementwise-style kernels
// (pointwise.cpp, index.cpp): walks the index space of operand 0, with every
// operand's strides in bytes, size-1 dims dropped and contiguous runs
// coalesced, so that the inner loop is as long (and as flat) as possible.
#pragma once

#include <algorithm>

#include "kernels.h"

namespace flagos_host::kernels {

template <int N>
struct Iter {
  int ndim = 0;
  int64_t shape[FLAGOS_MAX_DIMS];
  int64_t strides[N][FLAGOS_MAX_DIMS];  // bytes
  char* base[N];
};

template <int N>
Iter<N> makeIter(const Tensor* const* ts, const int* elem_size) {
  Iter<N> it;
  const Tensor& out = *ts[0];
  for (int k = 0; k < N; ++k) it.base[k] = ts[k]->data;
  // Drop size-1 dims, keep the rest in order.
  for (int d = 0; d < out.ndim; ++d) {
    if (out.shape[d] == 1) continue;
    it.shape[it.ndim] = out.shape[d];
    for (int k = 0; k < N; ++k) it.strides[k][it.ndim] = ts[k]->strides[d] * elem_size[k];
    ++it.ndim;
  }
  // Coalesce dim d-1 into d where every operand allows it.
  int w = it.ndim - 1;
  for (int d = it.ndim - 2; d >= 0 && w >= 0; --d) {
    bool ok = true;
    for (int k = 0; k < N; ++k)
      if (it.strides[k][d] != it.strides[k][w] * it.shape[w]) ok = false;
    if (ok) {
      it.shape[w] *= it.shape[d];
    } else {
      --w;
      it.shape[w] = it.shape[d];
      for (int k = 0; k < N; ++k) it.strides[k][w] = it.strides[k][d];
    }
  }
  if (it.ndim > 0) {
    const int first = w, n = it.ndim - first;
    for (int d = 0; d < n; ++d) {
      it.shape[d] = it.shape[first + d];
      for (int k = 0; k < N; ++k) it.strides[k][d] = it.strides[k][first + d];
    }
    it.ndim = n;
  }
  return it;
}

// body(char* ptrs[N], int64_t count, const int64_t inner_strides[N])
template <int N, typename Body>
void forEach(const Iter<N>& it, int64_t numel, const Body& body) {
  if (numel == 0) return;
  if (it.ndim == 0) {
    char* p[N];
    int64_t s[N] = {};
    for (int k = 0; k < N; ++k) p[k] = it.base[k];
    body(p, 1, s);
    return;
  }
  const int last = it.ndim - 1;
  const int64_t inner = it.shape[last];
  const int64_t outer = numel / inner;
  int64_t inner_strides[N];
  for (int k = 0; k < N; ++k) inner_strides[k] = it.strides[k][last];
  if (it.ndim == 1) {
    // One (coalesced) row: split the row itself so that a large contiguous
    // tensor uses the pool too (elements are independent).
    parallelFor(inner, 32768, [&](int64_t begin, int64_t end) {
      char* p[N];
      for (int k = 0; k < N; ++k) p[k] = it.base[k] + begin * inner_strides[k];
      body(p, end - begin, inner_strides);
    });
    return;
  }
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1));
  parallelFor(outer, grain, [&](int64_t begin, int64_t end) {
    int64_t coord[FLAGOS_MAX_DIMS] = {};
    int64_t rem = begin;
    for (int d = last - 1; d >= 0; --d) {
      coord[d] = rem % it.shape[d];
      rem /= it.shape[d];
    }
    char* p[N];
    for (int64_t o = begin; o < end; ++o) {
      for (int k = 0; k < N; ++k) {
        p[k] = it.base[k];
        for (int d = 0; d < last; ++d) p[k] += coord[d] * it.strides[k][d];
      }
      body(p, inner, inner_strides);
      for (int d = last - 1; d >= 0; --d) {
        if (++coord[d] < it.shape[d]) break;
        coord[d] = 0;
      }
    }
  });
}

}  // namespace flagos_host::kernels
