! The PMPI shim's Fortran entry points of the collectives beyond allreduce,
! bcast and barrier (`use mpi`), against closed forms: MPI_REDUCE (also in
! place at the root), MPI_SCAN, MPI_EXSCAN, MPI_REDUCE_SCATTER_BLOCK (in
! place), MPI_REDUCE_SCATTER (uneven), MPI_ALLGATHER (in place),
! MPI_IALLGATHER + MPI_WAIT, MPI_ALLGATHERV (gaps), MPI_GATHER, MPI_GATHERV,
! MPI_SCATTER (in place at the root), MPI_SCATTERV, MPI_ALLTOALL,
! MPI_IALLTOALL, MPI_ALLTOALLV, MPI_IREDUCE, MPI_IGATHER, MPI_ISCATTER,
! MPI_IEXSCAN. The meson test checks rank 0's COLL_MPI_STATS lines: each
! one served, none passed to MPI.
program pmpi_fcolls
  use mpi
  implicit none
  integer :: ierr, rank, np, i, r, errors, total, req
  integer, allocatable :: a(:), b(:), counts(:), displs(:), sc(:), sd(:)
  integer :: x(3), y(3)

  errors = 0
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
  allocate(a(4 * np + 4 * np), b(4 * np + 4 * np), counts(np), displs(np), sc(np), sd(np))

  ! reductions: x(i) = rank + i
  x = (/ (rank + i, i = 1, 3) /)
  y = -1
  call MPI_REDUCE(x, y, 3, MPI_INTEGER, MPI_SUM, np - 1, MPI_COMM_WORLD, ierr)
  if (rank == np - 1 .and. any(y /= (/ (np * i + np * (np - 1) / 2, i = 1, 3) /))) errors = errors + 1
  y = x
  if (rank == 0) then
    call MPI_REDUCE(MPI_IN_PLACE, y, 3, MPI_INTEGER, MPI_MAX, 0, MPI_COMM_WORLD, ierr)
    if (any(y /= (/ (np - 1 + i, i = 1, 3) /))) errors = errors + 1
  else
    call MPI_REDUCE(x, y, 3, MPI_INTEGER, MPI_MAX, 0, MPI_COMM_WORLD, ierr)
  end if
  call MPI_IREDUCE(x, y, 3, MPI_INTEGER, MPI_MIN, 0, MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (rank == 0 .and. any(y /= (/ 1, 2, 3 /))) errors = errors + 1
  call MPI_SCAN(x, y, 3, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (any(y /= (/ ((rank + 1) * i + rank * (rank + 1) / 2, i = 1, 3) /))) errors = errors + 1
  y = -7
  call MPI_EXSCAN(x, y, 3, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank > 0 .and. any(y /= (/ (rank * i + (rank - 1) * rank / 2, i = 1, 3) /))) errors = errors + 1
  call MPI_IEXSCAN(x, y, 3, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (rank > 0 .and. any(y /= (/ (rank * i + (rank - 1) * rank / 2, i = 1, 3) /))) errors = errors + 1

  ! reduce_scatter_block in place: element j of rank r's input is r + j
  a(1:2 * np) = (/ (rank + i, i = 1, 2 * np) /)
  call MPI_REDUCE_SCATTER_BLOCK(MPI_IN_PLACE, a, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  do i = 1, 2
    if (a(i) /= np * (2 * rank + i) + np * (np - 1) / 2) errors = errors + 1
  end do
  ! reduce_scatter: rank r gets r + 1 elements
  counts = (/ (r + 1, r = 0, np - 1) /)
  total = sum(counts)
  a(1:total) = (/ (rank + i, i = 1, total) /)
  b = -1
  call MPI_REDUCE_SCATTER(a, b, counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  do i = 1, rank + 1
    if (b(i) /= np * (rank * (rank + 1) / 2 + i) + np * (np - 1) / 2) errors = errors + 1
  end do

  ! allgather in place, iallgather: block r holds 10 r + 1, 10 r + 2
  a = -1
  a(2 * rank + 1) = 10 * rank + 1
  a(2 * rank + 2) = 10 * rank + 2
  call MPI_ALLGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, 2, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do r = 0, np - 1
    if (a(2 * r + 1) /= 10 * r + 1 .or. a(2 * r + 2) /= 10 * r + 2) errors = errors + 1
  end do
  x(1:2) = (/ 10 * rank + 1, 10 * rank + 2 /)
  b = -1
  call MPI_IALLGATHER(x, 2, MPI_INTEGER, b, 2, MPI_INTEGER, MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (any(b(1:2 * np) /= a(1:2 * np))) errors = errors + 1
  ! allgatherv with a gap of one before each block; rank r sends r + 1 values
  do r = 0, np - 1
    counts(r + 1) = r + 1
    displs(r + 1) = r * (r + 1) / 2 + r + 1
  end do
  a(1:rank + 1) = rank
  b = -1
  call MPI_ALLGATHERV(a, rank + 1, MPI_INTEGER, b, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do r = 0, np - 1
    if (any(b(displs(r + 1) + 1:displs(r + 1) + r + 1) /= r) .or. b(displs(r + 1)) /= -1) errors = errors + 1
  end do

  ! gather, igather, gatherv to the last rank
  x(1) = rank * 3
  b = -1
  call MPI_GATHER(x, 1, MPI_INTEGER, b, 1, MPI_INTEGER, np - 1, MPI_COMM_WORLD, ierr)
  if (rank == np - 1 .and. any(b(1:np) /= (/ (3 * r, r = 0, np - 1) /))) errors = errors + 1
  b = -1
  call MPI_IGATHER(x, 1, MPI_INTEGER, b, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (rank == 0 .and. any(b(1:np) /= (/ (3 * r, r = 0, np - 1) /))) errors = errors + 1
  b = -1
  call MPI_GATHERV(a, rank + 1, MPI_INTEGER, b, counts, displs, MPI_INTEGER, np - 1, MPI_COMM_WORLD, ierr)
  if (rank == np - 1) then
    do r = 0, np - 1
      if (any(b(displs(r + 1) + 1:displs(r + 1) + r + 1) /= r)) errors = errors + 1
    end do
  end if

  ! scatter in place at the root (0), iscatter, scatterv from the gatherv layout
  a(1:np) = (/ (5 * r, r = 0, np - 1) /)
  y(1) = -1
  if (rank == 0) then
    call MPI_SCATTER(a, 1, MPI_INTEGER, MPI_IN_PLACE, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  else
    call MPI_SCATTER(a, 1, MPI_INTEGER, y, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    if (y(1) /= 5 * rank) errors = errors + 1
  end if
  y(1) = -1
  call MPI_ISCATTER(a, 1, MPI_INTEGER, y, 1, MPI_INTEGER, np - 1, MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (y(1) /= 5 * rank) errors = errors + 1
  do r = 0, np - 1
    b(displs(r + 1) + 1:displs(r + 1) + r + 1) = 100 + r
  end do
  a = -1
  call MPI_SCATTERV(b, counts, displs, MPI_INTEGER, a, rank + 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (any(a(1:rank + 1) /= 100 + rank) .or. a(rank + 2) /= -1) errors = errors + 1

  ! alltoall: to peer p the value 100 rank + p; ialltoall; alltoallv: r + 1 values to every peer
  a(1:np) = (/ (100 * rank + r, r = 0, np - 1) /)
  b = -1
  call MPI_ALLTOALL(a, 1, MPI_INTEGER, b, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  if (any(b(1:np) /= (/ (100 * r + rank, r = 0, np - 1) /))) errors = errors + 1
  b = -1
  call MPI_IALLTOALL(a, 1, MPI_INTEGER, b, 1, MPI_INTEGER, MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (any(b(1:np) /= (/ (100 * r + rank, r = 0, np - 1) /))) errors = errors + 1
  do r = 0, np - 1
    sc(r + 1) = rank + 1
    sd(r + 1) = r * (rank + 1)
    counts(r + 1) = r + 1
    displs(r + 1) = r * (r + 1) / 2
  end do
  a(1:np * (rank + 1)) = rank
  b = -1
  call MPI_ALLTOALLV(a, sc, sd, MPI_INTEGER, b, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do r = 0, np - 1
    if (any(b(displs(r + 1) + 1:displs(r + 1) + r + 1) /= r)) errors = errors + 1
  end do

  call MPI_ALLREDUCE(errors, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(a,i0)', 'pmpi_fcolls: all checks passed at np ', np
    else
      print '(a,i0,a)', 'pmpi_fcolls: ', total, ' failed checks'
    end if
  end if
  call MPI_FINALIZE(ierr)
end program pmpi_fcolls
