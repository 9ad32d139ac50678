! The PMPI shim under a Fortran program (`use mpi`): MPI_ALLREDUCE (also
! with MPI_IN_PLACE), MPI_BCAST, MPI_BARRIER, MPI_IALLREDUCE + MPI_WAIT,
! MPI_IBCAST + MPI_WAITALL, on MPI_COMM_WORLD and on communicators from
! MPI_COMM_SPLIT and MPI_COMM_DUP. Open MPI's Fortran bindings call PMPI_
! directly: these calls are served only through the shim's Fortran entry
! points, which the meson test checks in the COLL_MPI_STATS lines (exact
! counts of rank 0). A user operator (the shim's MPI_OP_CREATE, which has
! Open MPI make it and records it) is served too, and freed through the
! shim's MPI_OP_FREE (pmpi_fuserops.f90 tests such ops at length).
! MPI_ERROR_STRING (the shim's): MPI's text, blank-padded.
program pmpi_fortran
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, i, errors, total, half, dup, req, reqs(2), op
  integer :: ivals(5), isum(5)
  double precision :: dvals(3)
  integer :: buf(4), elen
  character(len=MPI_MAX_ERROR_STRING) :: estr
  external :: user_sum

  errors = 0
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)

  ! 1: integers
  do i = 1, 5
    ivals(i) = rank + i
  end do
  call MPI_ALLREDUCE(ivals, isum, 5, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  do i = 1, 5
    if (isum(i) /= nprocs * i + nprocs * (nprocs - 1) / 2) errors = errors + 1
  end do

  ! 2: double precision in place
  dvals = (/ dble(rank), 1.5d0, -dble(rank) /)
  call MPI_ALLREDUCE(MPI_IN_PLACE, dvals, 3, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (abs(dvals(1) - dble(nprocs - 1)) + abs(dvals(2) - 1.5d0) + abs(dvals(3)) > 0.5d-12) errors = errors + 1

  ! 3: non-blocking
  ivals = 1
  call MPI_IALLREDUCE(ivals, isum, 5, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (any(isum /= nprocs) .or. req /= MPI_REQUEST_NULL) errors = errors + 1

  ! bcast, ibcast, barrier
  buf = -1
  if (rank == 0) buf = (/ 7, 8, 9, 10 /)
  call MPI_BCAST(buf, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (any(buf /= (/ 7, 8, 9, 10 /))) errors = errors + 1
  buf = -1
  if (rank == nprocs - 1) buf = 3
  call MPI_IBCAST(buf, 4, MPI_INTEGER, nprocs - 1, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_IBARRIER(MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_WAITALL(2, reqs, MPI_STATUSES_IGNORE, ierr)
  if (any(buf /= 3)) errors = errors + 1
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)

  ! 4: a split communicator (reversed order), 5: a dup of it
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, mod(rank, 2), -rank, half, ierr)
  call MPI_ALLREDUCE(1, total, 1, MPI_INTEGER, MPI_SUM, half, ierr)
  if (total /= (nprocs + 1 - mod(rank, 2)) / 2) errors = errors + 1
  call MPI_COMM_DUP(half, dup, ierr)
  call MPI_ALLREDUCE(rank, total, 1, MPI_INTEGER, MPI_MIN, dup, ierr)
  if (total /= mod(rank, 2)) errors = errors + 1
  call MPI_COMM_FREE(dup, ierr)
  call MPI_COMM_FREE(half, ierr)

  ! a user operator
  call MPI_OP_CREATE(user_sum, .true., op, ierr)
  call MPI_ALLREDUCE(rank, total, 1, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
  if (total /= nprocs * (nprocs - 1) / 2) errors = errors + 1
  call MPI_OP_FREE(op, ierr)
  if (ierr /= MPI_SUCCESS .or. op /= MPI_OP_NULL) errors = errors + 1

  estr = 'x'
  call MPI_ERROR_STRING(MPI_ERR_ARG, estr, elen, ierr)
  if (ierr /= MPI_SUCCESS .or. estr(1:12) /= 'MPI_ERR_ARG:' .or. elen /= len_trim(estr)) &
    errors = errors + 1

  call MPI_REDUCE(errors, total, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(a,i0)', 'pmpi_fortran: all checks passed at np ', nprocs
    else
      print '(a,i0,a)', 'pmpi_fortran: ', total, ' failed checks'
    end if
  end if
  call MPI_FINALIZE(ierr)
end program pmpi_fortran

subroutine user_sum(invec, inoutvec, len, datatype)
  use mpi
  implicit none
  integer :: len, datatype, i
  integer :: invec(len), inoutvec(len)
  if (datatype /= MPI_INTEGER) return
  do i = 1, len
    inoutvec(i) = inoutvec(i) + invec(i)
  end do
end subroutine user_sum
