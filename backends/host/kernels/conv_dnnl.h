// float32 2-D convolution through oneDNN (conv_dnnl.cpp), used by conv.cpp
// when the plugin is built with oneDNN (FLAGOS_HOST_DNNL). Contiguous NCHW
// buffers in and out; oneDNN picks its own (blocked) layouts inside and the
// primitives are cached per shape. Each call runs synchronously on the
// calling thread (a stream worker). Returns false if oneDNN refused the
// shape (the caller then takes its im2col path).
#pragma once

#include <cstdint>

namespace flagos_host::kernels {

struct ConvShape {
  int64_t N, C, H, W, OC, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, G;
};

bool dnnlConvForward(const ConvShape& s, const float* x, const float* w, const float* b, float* y);
bool dnnlConvBackwardData(const ConvShape& s, const float* gy, const float* w, float* gx);
// gb may be NULL (no bias gradient).
bool dnnlConvBackwardWeights(const ConvShape& s, const float* x, const float* gy, float* gw,
                             float* gb);

}  // namespace flagos_host::kernels
