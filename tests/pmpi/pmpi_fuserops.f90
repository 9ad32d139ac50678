! User-defined operators made in Fortran (MPI_OP_CREATE, `use mpi`) through
! the PMPI shim, against closed forms. The shim has Open MPI make the op and
! records it; its reductions are served by libcoll, which calls the Fortran
! function with Fortran's arguments (LEN and the INTEGER DATATYPE handle, by
! reference).
!
!  - a commutative op (the elementwise sum) on MPI_INTEGER and
!    MPI_DOUBLE_PRECISION, whose function reads the datatype handle it is
!    given: MPI_ALLREDUCE (also in place, and 200000 elements),
!    MPI_IALLREDUCE, MPI_REDUCE at the last rank, MPI_SCAN, MPI_EXSCAN,
!    MPI_REDUCE_SCATTER_BLOCK;
!  - a non-commutative one: the 2x2 integer matrix product, one matrix per
!    element of MPI_TYPE_CONTIGUOUS(4, MPI_INTEGER); rank r's matrix for
!    element i is [[r + 1, i], [0, 1]] (the affine map x -> (r + 1) x + i),
!    whose product over ranks 0 .. k in rank order is
!    [[(k + 1)!, i (0! + 1! + ... + k!)], [0, 1]] (another order gives
!    another value): MPI_ALLREDUCE, MPI_REDUCE at root 0 and at the last
!    rank, MPI_SCAN, MPI_EXSCAN, MPI_REDUCE_SCATTER_BLOCK;
!  - a datatype of 12 bytes (three INTEGERs), a size no libcoll element
!    has: served packed, each element padded to 16 bytes and unpacked again
!    for the function;
!  - one of 36 bytes (nine INTEGERs), more than libcoll's largest element:
!    passed to MPI, which must call the function the Fortran way too;
!  - MPI_OP_FREE (the handle becomes MPI_OP_NULL), then a new op (Open MPI
!    may reuse the handle) with another function (the largest).
!
! The meson test checks rank 0's COLL_MPI_STATS lines (exact counts: every
! reduction served, but the one of 36-byte elements); without the shim the
! same program checks plain Open MPI (the reference run).
module pmpi_fuserops_fns
  use, intrinsic :: iso_c_binding, only : c_f_pointer, c_loc
  use mpi
  implicit none
  integer :: mat_type = MPI_DATATYPE_NULL, int3_type = MPI_DATATYPE_NULL
  integer :: int9_type = MPI_DATATYPE_NULL
  integer :: wrong_type = 0  ! calls of a function with a datatype it was not made for
contains
  ! inoutvec = invec + inoutvec, elementwise: INTEGER, DOUBLE PRECISION, or
  ! three (nine) INTEGERs an element of int3_type (int9_type).
  subroutine fsum(invec, inoutvec, len, datatype)
    integer, intent(in) :: len, datatype
    integer, target :: invec(*), inoutvec(*)
    double precision, pointer :: a(:), b(:)
    if (len < 1) return
    if (datatype == MPI_INTEGER) then
      inoutvec(1:len) = inoutvec(1:len) + invec(1:len)
    else if (datatype == int3_type) then
      inoutvec(1:3 * len) = inoutvec(1:3 * len) + invec(1:3 * len)
    else if (datatype == int9_type) then
      inoutvec(1:9 * len) = inoutvec(1:9 * len) + invec(1:9 * len)
    else if (datatype == MPI_DOUBLE_PRECISION) then
      call c_f_pointer(c_loc(invec(1)), a, (/ len /))
      call c_f_pointer(c_loc(inoutvec(1)), b, (/ len /))
      b = b + a
    else
      wrong_type = wrong_type + 1
    end if
  end subroutine fsum

  subroutine fmax(invec, inoutvec, len, datatype)
    integer, intent(in) :: len, datatype
    integer :: invec(len), inoutvec(len)
    if (datatype /= MPI_INTEGER) then
      wrong_type = wrong_type + 1
      return
    end if
    inoutvec = max(invec, inoutvec)
  end subroutine fmax

  ! A matrix is (/ m11, m12, m21, m22 /). inoutvec = invec x inoutvec:
  ! invec holds the lower ranks' product.
  subroutine fmatmul(invec, inoutvec, len, datatype)
    integer, intent(in) :: len, datatype
    integer :: invec(4, len), inoutvec(4, len)
    integer :: i
    if (datatype /= mat_type) then
      wrong_type = wrong_type + 1
      return
    end if
    do i = 1, len
      inoutvec(:, i) = mat_product(invec(:, i), inoutvec(:, i))
    end do
  end subroutine fmatmul

  pure function mat_product(a, b) result(r)
    integer, intent(in) :: a(4), b(4)
    integer :: r(4)
    r(1) = a(1) * b(1) + a(2) * b(3)
    r(2) = a(1) * b(2) + a(2) * b(4)
    r(3) = a(3) * b(1) + a(4) * b(3)
    r(4) = a(3) * b(2) + a(4) * b(4)
  end function mat_product

  pure function mat_of(r, i) result(m)
    integer, intent(in) :: r, i
    integer :: m(4)
    m = (/ r + 1, i, 0, 1 /)
  end function mat_of

  ! The product of the matrices of ranks 0 .. k, in rank order.
  pure function mat_expect(k, i) result(m)
    integer, intent(in) :: k, i
    integer :: m(4), j, f, s
    f = 1  ! j!
    s = 1  ! 0! + ... + j!
    do j = 1, k
      f = f * j
      s = s + f
    end do
    m = (/ f * (k + 1), i * s, 0, 1 /)
  end function mat_expect
end module pmpi_fuserops_fns

program pmpi_fuserops
  use mpi
  use pmpi_fuserops_fns
  implicit none
  integer, parameter :: nbig = 200000
  integer :: ierr, rank, np, i, k, errors, total, req
  integer :: sum_op, mat_op, max_op
  integer :: x(5), y(5), t3(3, 2), u3(3, 2), t9(9, 2), u9(9, 2)
  integer, allocatable :: big(:), bigsum(:), a(:), m(:, :), p(:, :)
  double precision :: d(3)

  errors = 0
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
  call MPI_TYPE_CONTIGUOUS(4, MPI_INTEGER, mat_type, ierr)
  call MPI_TYPE_COMMIT(mat_type, ierr)
  call MPI_TYPE_CONTIGUOUS(3, MPI_INTEGER, int3_type, ierr)
  call MPI_TYPE_COMMIT(int3_type, ierr)
  call MPI_TYPE_CONTIGUOUS(9, MPI_INTEGER, int9_type, ierr)
  call MPI_TYPE_COMMIT(int9_type, ierr)
  call MPI_OP_CREATE(fsum, .true., sum_op, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_OP_CREATE(fsum)')
  call MPI_OP_CREATE(fmatmul, .false., mat_op, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_OP_CREATE(fmatmul)')

  ! ---- commutative: x(i) = rank * i + 1
  x = (/ (rank * i + 1, i = 1, 5) /)
  call MPI_ALLREDUCE(x, y, 5, MPI_INTEGER, sum_op, MPI_COMM_WORLD, ierr)
  call check(all(y == (/ (i * np * (np - 1) / 2 + np, i = 1, 5) /)), 'allreduce integer')
  d = (/ 0.5d0, dble(rank), -2d0 * rank /)
  call MPI_ALLREDUCE(MPI_IN_PLACE, d, 3, MPI_DOUBLE_PRECISION, sum_op, MPI_COMM_WORLD, ierr)
  ! Sums of small integers and halves: exact in double precision.
  call check(maxval(abs(d - (/ 0.5d0 * np, dble(np * (np - 1) / 2), -dble(np * (np - 1)) /))) &
             < 1d-9, 'allreduce double precision in place')
  allocate(big(nbig), bigsum(nbig))
  big = (/ (mod(i, 1000) + rank, i = 1, nbig) /)
  bigsum = -1
  call MPI_ALLREDUCE(big, bigsum, nbig, MPI_INTEGER, sum_op, MPI_COMM_WORLD, ierr)
  call check(all(bigsum == (/ (np * mod(i, 1000) + np * (np - 1) / 2, i = 1, nbig) /)), &
             'allreduce of 200000 integers')
  y = -1
  call MPI_IALLREDUCE(x, y, 5, MPI_INTEGER, sum_op, MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  call check(all(y == (/ (i * np * (np - 1) / 2 + np, i = 1, 5) /)), 'iallreduce')
  y = -1
  call MPI_REDUCE(x, y, 5, MPI_INTEGER, sum_op, np - 1, MPI_COMM_WORLD, ierr)
  if (rank == np - 1) &
    call check(all(y == (/ (i * np * (np - 1) / 2 + np, i = 1, 5) /)), 'reduce at the last rank')
  d = (/ 1d0, 2d0, 3d0 /) * (rank + 1)
  call MPI_SCAN(MPI_IN_PLACE, d, 3, MPI_DOUBLE_PRECISION, sum_op, MPI_COMM_WORLD, ierr)
  call check(maxval(abs(d - (/ 1d0, 2d0, 3d0 /) * ((rank + 1) * (rank + 2) / 2))) < 1d-9, 'scan')
  y = -1
  call MPI_EXSCAN(x, y, 5, MPI_INTEGER, sum_op, MPI_COMM_WORLD, ierr)
  if (rank > 0) &
    call check(all(y == (/ (i * rank * (rank - 1) / 2 + rank, i = 1, 5) /)), 'exscan')
  ! element j of rank r's input is r + j; rank k gets elements 2k + 1, 2k + 2
  allocate(a(2 * np))
  a = (/ (rank + i, i = 1, 2 * np) /)
  y = -1
  call MPI_REDUCE_SCATTER_BLOCK(a, y, 2, MPI_INTEGER, sum_op, MPI_COMM_WORLD, ierr)
  call check(all(y(1:2) == (/ (np * (2 * rank + i) + np * (np - 1) / 2, i = 1, 2) /)), &
             'reduce_scatter_block')
  ! served packed (no libcoll element of 12 bytes: padded to 16)
  t3 = reshape((/ (rank + i, i = 1, 6) /), (/ 3, 2 /))
  u3 = -1
  call MPI_ALLREDUCE(t3, u3, 2, int3_type, sum_op, MPI_COMM_WORLD, ierr)
  call check(all(u3 == reshape((/ (np * i + np * (np - 1) / 2, i = 1, 6) /), (/ 3, 2 /))), &
             'allreduce of 12-byte elements')
  ! passed to MPI (36 bytes: more than any libcoll element): Open MPI calls fsum
  t9 = reshape((/ (rank + i, i = 1, 18) /), (/ 9, 2 /))
  u9 = -1
  call MPI_ALLREDUCE(t9, u9, 2, int9_type, sum_op, MPI_COMM_WORLD, ierr)
  call check(all(u9 == reshape((/ (np * i + np * (np - 1) / 2, i = 1, 18) /), (/ 9, 2 /))), &
             'allreduce of 36-byte elements (MPI)')

  ! ---- non-commutative: 3 matrices a rank (np for reduce_scatter_block)
  allocate(m(4, np + 3), p(4, np + 3))
  do i = 1, np + 3
    m(:, i) = mat_of(rank, i)
  end do
  p = -1
  call MPI_ALLREDUCE(m, p, 3, mat_type, mat_op, MPI_COMM_WORLD, ierr)
  call check(mats_are(np - 1, 3, 1), 'allreduce of matrices')
  do k = 0, np - 1, max(np - 1, 1)
    p = -1
    call MPI_REDUCE(m, p, 3, mat_type, mat_op, k, MPI_COMM_WORLD, ierr)
    if (rank == k) call check(mats_are(np - 1, 3, 1), 'reduce of matrices')
  end do
  p = -1
  call MPI_SCAN(m, p, 3, mat_type, mat_op, MPI_COMM_WORLD, ierr)
  call check(mats_are(rank, 3, 1), 'scan of matrices')
  p = -1
  call MPI_EXSCAN(m, p, 3, mat_type, mat_op, MPI_COMM_WORLD, ierr)
  if (rank > 0) call check(mats_are(rank - 1, 3, 1), 'exscan of matrices')
  ! matrix j of every rank's input goes to rank j - 1
  p = -1
  call MPI_REDUCE_SCATTER_BLOCK(m, p, 1, mat_type, mat_op, MPI_COMM_WORLD, ierr)
  call check(all(p(:, 1) == mat_expect(np - 1, rank + 1)), 'reduce_scatter_block of matrices')
  ! the order matters: the reverse product of ranks 0 and 1 differs
  call check(any(mat_product(mat_of(1, 1), mat_of(0, 1)) /= mat_expect(1, 1)), &
             'a non-commutative test')

  ! ---- free, and a new op with another function
  call MPI_OP_FREE(sum_op, ierr)
  call check(ierr == MPI_SUCCESS .and. sum_op == MPI_OP_NULL, 'MPI_OP_FREE')
  call MPI_OP_CREATE(fmax, .true., max_op, ierr)
  y = -1
  call MPI_ALLREDUCE(x, y, 5, MPI_INTEGER, max_op, MPI_COMM_WORLD, ierr)
  call check(all(y == (/ ((np - 1) * i + 1, i = 1, 5) /)), 'allreduce with a new op')
  call MPI_OP_FREE(max_op, ierr)
  call MPI_OP_FREE(mat_op, ierr)
  call check(ierr == MPI_SUCCESS .and. mat_op == MPI_OP_NULL, 'MPI_OP_FREE')
  call check(wrong_type == 0, 'functions given the program''s datatype handles')
  call MPI_TYPE_FREE(mat_type, ierr)
  call MPI_TYPE_FREE(int3_type, ierr)
  call MPI_TYPE_FREE(int9_type, ierr)

  call MPI_REDUCE(errors, total, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(a,i0)', 'pmpi_fuserops: all checks passed at np ', np
    else
      print '(a,i0,a)', 'pmpi_fuserops: ', total, ' failed checks'
    end if
  end if
  call MPI_FINALIZE(ierr)

contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (ok) return
    errors = errors + 1
    write (0, '(a,i0,a,a)') 'rank ', rank, ': failed: ', what
  end subroutine check

  ! p(:, first .. first + n - 1) hold the products over ranks 0 .. k of
  ! matrices first .. first + n - 1.
  logical function mats_are(k, n, first)
    integer, intent(in) :: k, n, first
    integer :: j
    mats_are = .true.
    do j = first, first + n - 1
      if (any(p(:, j) /= mat_expect(k, j))) mats_are = .false.
    end do
  end function mats_are
end program pmpi_fuserops
