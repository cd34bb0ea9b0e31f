// bench/multinode/reduce_scatter_wire.c: one MPI collective, repeated, so that its bytes
// on the wire can be counted (tests/multinode/netns.sh wire, before and after a run).
// Not built by CMake:  mpicc -O2 -o /tmp/rsw bench/multinode/reduce_scatter_wire.c
//   reduce_scatter_wire COUNT_PER_RANK ITERS MODE
//     MODE nb: MPI_Ireduce_scatter_block (the call zt's MpiComm makes), b: MPI_Reduce_scatter_block,
//          ag: MPI_Iallgather; COUNT_PER_RANK floats per rank (the buffer is ranks x that)
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 4) {
    fprintf(stderr, "usage: reduce_scatter_wire COUNT_PER_RANK ITERS nb|b|ag\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int c = atoi(argv[1]), iters = atoi(argv[2]);
  const char* mode = argv[3];
  float* send = calloc((size_t)c * (size_t)n, sizeof(float));
  float* recv = calloc((size_t)c * (size_t)n, sizeof(float));
  for (int i = 0; i < iters; ++i) {
    MPI_Request q = MPI_REQUEST_NULL;
    if (strcmp(mode, "nb") == 0)
      MPI_Ireduce_scatter_block(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
    else if (strcmp(mode, "b") == 0)
      MPI_Reduce_scatter_block(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else
      MPI_Iallgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
