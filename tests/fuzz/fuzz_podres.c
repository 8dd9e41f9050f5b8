/* libFuzzer target for the decoder of the kubelet's pod-resources answer (collect/kubelet_podres.c:
 * a protobuf ListPodResourcesResponse read from a socket another program serves):
 *  1. any bytes decode to some devices or to -1, never a crash, a hang or a read past the message;
 *  2. at most max devices come out, each with a non-empty id and pod and namespace names of
 *     Kubernetes' characters only, so nothing that could split a label reaches the exposition.
 * Built with clang's -fsanitize=fuzzer,address,undefined by tests/fuzz/CMakeLists.txt. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collect.h"

#define REQUIRE(c)                                                                                                     \
  do {                                                                                                                 \
    if (!(c))                                                                                                          \
      abort();                                                                                                         \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  enum { MAX = 8 };
  struct collect_podres_gpu out[MAX];
  uint8_t *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees a read past them */
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  int n = collect_podres_decode(copy, size, out, MAX);
  REQUIRE(n >= -1 && n <= MAX);
  for (int i = 0; i < n; i++) {
    REQUIRE(out[i].uuid[0] && out[i].pod[0] && out[i].ns[0]);
    REQUIRE(strspn(out[i].pod, "abcdefghijklmnopqrstuvwxyz0123456789.-") == strlen(out[i].pod));
    REQUIRE(strspn(out[i].ns, "abcdefghijklmnopqrstuvwxyz0123456789.-") == strlen(out[i].ns));
    REQUIRE(!strpbrk(out[i].uuid, ",=\"\\\n"));
  }
  free(copy);
  return 0;
}
