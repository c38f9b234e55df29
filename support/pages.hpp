// Memory for large buffers, shared by the runtime's arrays and blocks and LAPACK's workspaces:
// - from 4 MiB on, 2 MiB aligned and backed by transparent huge pages where the kernel offers
//   them on request (THP "madvise" mode, Debian's default): faulting in fresh 4 KiB pages one by
//   one costs about 0.5 ms per MiB on these VMs, several times what writing the data does (huge
//   pages: about 0.12 ms per MiB). NumPy does the same for arrays of 4 MiB or more.
// - freed buffers of at least 1 MiB are kept, up to 1 GiB in all, and handed out again to an
//   allocation of the same rounded size: an iterative solver's blocks, the same shapes every
//   iteration, and TSQR's per-block workspaces then come from memory already mapped instead of
//   fresh pages (zeroing those was a fifth of a Newton step at 1e6 x 100). Off under the
//   sanitizers, where reuse would hide a use after free, and with KILN_NO_BLOCK_POOL=1.
#pragma once
#include <cstddef>

namespace kiln {

// nullptr when the system has no memory left. Free with page_free and the same byte count.
void* page_alloc(size_t bytes);
void page_free(void* p, size_t bytes);

}  // namespace kiln
