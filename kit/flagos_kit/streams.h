// Stream-table members whose logic is the same in every plugin: the handle
// check, streamSynchronize and streamQuery (each a check, then the stream's
// own synchronize()/query()), and a device's synchronize over its streams.
// Templates over the plugin's flagosStream_st, which must have a
// `static constexpr uint32_t kMagic` (handle.h) and the two methods; the
// struct is only looked at where the plugin uses these.
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include "flagos/stream.h"
#include "flagos_kit/error.h"
#include "flagos_kit/handle.h"

namespace flagos_kit {

// Is @p stream a live stream? Records the message naming @p call if not.
template <typename Stream = flagosStream_st>
bool validStream(const char* call, const Stream* stream) noexcept {
  return validHandle(call, "stream", stream, Stream::kMagic);
}

// stream.h streamSynchronize: waits for the work queued before the call.
template <typename Stream = flagosStream_st>
flagosStatus_t streamSynchronize(Stream* stream) noexcept {
  return guard("streamSynchronize", [&] {
    return validStream("streamSynchronize", stream) ? stream->synchronize()
                                                    : FLAGOS_ERROR_INVALID_ARGUMENT;
  });
}

// stream.h streamQuery: NOT_READY while work is pending.
template <typename Stream = flagosStream_st>
flagosStatus_t streamQuery(Stream* stream) noexcept {
  return guard("streamQuery", [&] {
    return validStream("streamQuery", stream) ? stream->query() : FLAGOS_ERROR_INVALID_ARGUMENT;
  });
}

// device.h synchronize: waits for each of @p streams (the caller holds the
// lock that keeps them alive); the first error, if any.
template <typename Streams>
flagosStatus_t synchronizeStreams(const Streams& streams) {
  flagosStatus_t first = FLAGOS_SUCCESS;
  for (auto* stream : streams) {
    const flagosStatus_t status = stream->synchronize();
    if (first == FLAGOS_SUCCESS) first = status;
  }
  return first;
}

}  // namespace flagos_kit
