// Export control for the mote library. The library is built with hidden
// visibility; only declarations marked MOTE_API are part of its ABI.
#pragma once

#if defined(MOTE_SHARED)
#  define MOTE_API __attribute__((visibility("default")))
#else
#  define MOTE_API
#endif
#define MOTE_INTERNAL __attribute__((visibility("hidden")))
