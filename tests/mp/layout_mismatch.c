/* Ranks that disagree on the window layout (here COLL_SLOT_SIZE, set per
 * rank from COLL_RANK before coll_init): every rank must fail coll_init
 * with COLL_ERR_INVALID_ARG naming the knob, not write into its peers'
 * windows at offsets of its own layout. Exits 0 when it did. */
#include <coll/coll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  const char *rank = getenv("COLL_RANK");
  char value[32];
  snprintf(value, sizeof value, "%d", 4096 + 64 * (rank ? atoi(rank) : 0));
  setenv("COLL_SLOT_SIZE", value, 1);
  const int rc = coll_init(&argc, &argv);
  const char *why = coll_comm_last_error(NULL);
  if (rc != COLL_ERR_INVALID_ARG || !strstr(why, "disagree on COLL_SLOT_SIZE")) {
    fprintf(stderr, "rank %s: coll_init with COLL_SLOT_SIZE=%s: %d (%s), expected "
            "COLL_ERR_INVALID_ARG naming the disagreement\n", rank ? rank : "?", value, rc, why);
    if (rc == COLL_SUCCESS) coll_finalize();
    return 1;
  }
  printf("rank %s: refused: %s\n", rank ? rank : "?", why);
  return 0;
}
