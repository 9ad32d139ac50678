! Open MPI's persistent collectives under a Fortran program (`use mpi`,
! the extension's MPIX_*_INIT names): an allreduce, a bcast and a barrier
! made once, started 3 times (MPI_START, then MPI_STARTALL with a
! persistent point-to-point pair) with the input changed between starts,
! completed by MPI_WAIT / MPI_WAITALL, still allocated after each
! completion, freed by MPI_REQUEST_FREE. Open MPI's Fortran MPI_START and
! MPI_REQUEST_FREE call PMPI_ directly: the shim's Fortran entry points
! must catch them. The meson test checks the served counts of rank 0.
program pmpi_fpersist
  use mpi
  implicit none
  integer, parameter :: n = 1001
  integer :: ierr, rank, nprocs, i, it, errors, total, reqs(5)
  integer, volatile :: token, got
  ! Written by MPI while no call names them (a persistent request's
  ! buffers): the compiler must not keep them in registers across MPI_WAIT.
  integer, volatile :: vals(n), sums(n), buf(n)

  errors = 0
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  call MPIX_ALLREDUCE_INIT(vals, sums, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &
                           reqs(1), ierr)
  call MPIX_BCAST_INIT(buf, n, MPI_INTEGER, nprocs - 1, MPI_COMM_WORLD, MPI_INFO_NULL, reqs(2), &
                       ierr)
  call MPIX_BARRIER_INIT(MPI_COMM_WORLD, MPI_INFO_NULL, reqs(3), ierr)
  call MPI_SEND_INIT(token, 1, MPI_INTEGER, mod(rank + 1, nprocs), 5, MPI_COMM_WORLD, reqs(4), &
                     ierr)
  call MPI_RECV_INIT(got, 1, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), 5, MPI_COMM_WORLD, &
                     reqs(5), ierr)
  do it = 1, 3
    do i = 1, n
      vals(i) = rank + i + 10 * it
      sums(i) = -1
      buf(i) = -1
      if (rank == nprocs - 1) buf(i) = i * it
    end do
    token = 100 * rank + it
    got = -1
    call MPI_START(reqs(1), ierr)
    call MPI_WAIT(reqs(1), MPI_STATUS_IGNORE, ierr)
    if (reqs(1) == MPI_REQUEST_NULL) errors = errors + 1
    do i = 1, n
      if (sums(i) /= nprocs * (i + 10 * it) + nprocs * (nprocs - 1) / 2) errors = errors + 1
      sums(i) = -1
    end do
    call MPI_STARTALL(5, reqs, ierr)
    call MPI_WAITALL(5, reqs, MPI_STATUSES_IGNORE, ierr)
    do i = 1, 5
      if (reqs(i) == MPI_REQUEST_NULL) errors = errors + 1
    end do
    do i = 1, n
      if (sums(i) /= nprocs * (i + 10 * it) + nprocs * (nprocs - 1) / 2) errors = errors + 1
      if (buf(i) /= i * it) errors = errors + 1
    end do
    if (got /= 100 * mod(rank + nprocs - 1, nprocs) + it) errors = errors + 1
  end do
  do i = 1, 5
    call MPI_REQUEST_FREE(reqs(i), ierr)
    if (ierr /= MPI_SUCCESS .or. reqs(i) /= MPI_REQUEST_NULL) errors = errors + 1
  end do
  call MPI_ALLREDUCE(errors, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(a,i0)', 'pmpi_fpersist: all checks passed at np ', nprocs
    else
      print '(a,i0,a)', 'pmpi_fpersist: ', total, ' checks failed'
    end if
  end if
  call MPI_FINALIZE(ierr)
end program pmpi_fpersist
