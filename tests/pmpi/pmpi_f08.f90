! The PMPI shim under `use mpi_f08`: Open MPI's mpi_f08 wrappers call the
! mpif.h layer (ompi_allreduce_f, ...), which the shim defines too
! (MPI_Error_string included). MPI_Op_create's wrapper calls Open MPI's
! pmpi_op_create_ instead, which the shim interposes as well: its ops are
! recorded and reductions with them served (the meson test checks the
! counts), the function called with the program's TYPE(MPI_Datatype) (one
! INTEGER, by reference); a non-commutative op (the left operand: the
! result is rank 0's input) in rank order.
module pmpi_f08_fns
  use, intrinsic :: iso_c_binding, only : c_ptr, c_f_pointer
  use mpi_f08, only : MPI_Datatype, MPI_INTEGER
  implicit none
  integer :: wrong_type = 0  ! calls with a datatype other than MPI_INTEGER
contains
  ! The operands as arrays of len INTEGERs; .false. (counted) for a
  ! datatype other than the program's MPI_INTEGER.
  logical function operands(invec, inoutvec, len, datatype, a, b)
    type(c_ptr), intent(in) :: invec, inoutvec
    integer, intent(in) :: len
    type(MPI_Datatype), intent(in) :: datatype
    integer, pointer, intent(out) :: a(:), b(:)
    operands = datatype%MPI_VAL == MPI_INTEGER%MPI_VAL
    if (.not. operands) then
      wrong_type = wrong_type + 1
      return
    end if
    call c_f_pointer(invec, a, (/ len /))
    call c_f_pointer(inoutvec, b, (/ len /))
  end function operands

  subroutine f08_sum(invec, inoutvec, len, datatype)
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    integer, pointer :: a(:), b(:)
    if (operands(invec, inoutvec, len, datatype, a, b)) b = b + a
  end subroutine f08_sum

  subroutine f08_first(invec, inoutvec, len, datatype)
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    integer, pointer :: a(:), b(:)
    if (operands(invec, inoutvec, len, datatype, a, b)) b = a
  end subroutine f08_first
end module pmpi_f08_fns

program pmpi_f08
  use mpi_f08
  use pmpi_f08_fns
  implicit none
  integer :: rank, nprocs, total, errors, elen, ierr, v(3), w(3)
  type(MPI_Op) :: op
  double precision :: x(2)
  character(len=MPI_MAX_ERROR_STRING) :: estr
  errors = 0
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (total /= nprocs * (nprocs - 1) / 2) errors = errors + 1
  x = (/ 1d0, dble(rank) /)
  call MPI_Allreduce(MPI_IN_PLACE, x, 2, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  if (abs(x(1) - dble(nprocs)) + abs(x(2) - dble(nprocs * (nprocs - 1) / 2)) > 0.5d-12) errors = errors + 1
  call MPI_Bcast(x, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD)
  call MPI_Op_create(f08_sum, .true., op)
  call MPI_Allreduce(rank + 1, total, 1, MPI_INTEGER, op, MPI_COMM_WORLD)
  if (total /= nprocs * (nprocs + 1) / 2) errors = errors + 1
  call MPI_Op_free(op)
  call MPI_Op_create(f08_first, .false., op)
  v = (/ rank, 10 * rank, 100 * rank + 1 /)
  w = -1
  call MPI_Reduce(v, w, 3, MPI_INTEGER, op, nprocs - 1, MPI_COMM_WORLD)
  if (rank == nprocs - 1 .and. any(w /= (/ 0, 0, 1 /))) errors = errors + 1
  call MPI_Op_free(op)
  if (wrong_type /= 0) errors = errors + 1
  call MPI_Barrier(MPI_COMM_WORLD)
  ! The shim's ompi_error_string_f (the length passed as a fifth argument):
  ! MPI's text, blank-padded.
  estr = 'x'
  call MPI_Error_string(MPI_ERR_ARG, estr, elen, ierr)
  if (ierr /= MPI_SUCCESS .or. estr(1:12) /= 'MPI_ERR_ARG:' .or. elen /= len_trim(estr)) &
    errors = errors + 1
  call MPI_Reduce(errors, total, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD)
  if (rank == 0 .and. total == 0) print '(a,i0)', 'pmpi_f08: all checks passed at np ', nprocs
  call MPI_Finalize()
end program pmpi_f08
