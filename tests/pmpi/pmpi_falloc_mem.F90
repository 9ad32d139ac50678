! MPI_ALLOC_MEM / MPI_FREE_MEM from Fortran through the shim (issue 32
! item 4). Open MPI's Fortran routines call PMPI_Alloc_mem, so the shim
! defines the Fortran names (fortran.cpp): the memory must come from
! coll_mem_alloc (mem_alloc.sh counts the chunks that landed in place from
! COLL_DEBUG's account) and bcast from every root and allgather into it give
! the exact bytes, at 1 B, 4095 B, one 128 KiB slot + 7 and three slots + 3.
! Built twice: `use mpi` (BASEPTR as INTEGER(KIND=MPI_ADDRESS_KIND) and as
! TYPE(C_PTR), the two forms taking turns) and, with -DUSE_F08, `use
! mpi_f08` (TYPE(C_PTR) only). Prints "pmpi_falloc_mem: all checks passed
! at np N" (the name given by NAME).
program pmpi_falloc_mem
#ifdef USE_F08
  use mpi_f08
#else
  use mpi
#endif
  use, intrinsic :: iso_c_binding, only : c_ptr, c_f_pointer
  implicit none
  integer, parameter :: nsizes = 4
  integer, parameter :: sizes(nsizes) = (/ 1, 4095, 131072 + 7, 3 * 131072 + 3 /)
  integer :: ierr, rank, n, k, root, round, bytes, i, q
  integer(kind=MPI_ADDRESS_KIND) :: total
#ifndef USE_F08
  integer(kind=MPI_ADDRESS_KIND) :: address
#endif
  type(c_ptr) :: base
  integer(kind=1), pointer :: buf(:)
  integer(kind=1), allocatable :: send(:)
  double precision :: t0

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  round = 0
  do k = 1, nsizes
    bytes = sizes(k)
    total = int(bytes, MPI_ADDRESS_KIND) * n
#ifdef USE_F08
    call MPI_Alloc_mem(total, MPI_INFO_NULL, base, ierr)
#else
    if (mod(k, 2) == 0) then
      call MPI_Alloc_mem(total, MPI_INFO_NULL, base, ierr)
    else
      call MPI_Alloc_mem(total, MPI_INFO_NULL, address, ierr)
      base = transfer(address, base)
    end if
#endif
    call check(ierr == MPI_SUCCESS, 'MPI_Alloc_mem')
    call c_f_pointer(base, buf, (/ bytes * n /))
    do root = 0, n - 1
      round = round + 1
      if (rank == root) then
        do i = 1, bytes
          buf(i) = pattern(root, i, round)
        end do
        ! The receivers offer first: the chunks land in place.
        t0 = MPI_Wtime()
        do while (MPI_Wtime() - t0 < 0.005d0)
        end do
      else
        buf(1:bytes) = -1
      end if
      call MPI_Bcast(buf, bytes, MPI_BYTE, root, MPI_COMM_WORLD, ierr)
      call check(ierr == MPI_SUCCESS, 'MPI_Bcast')
      do i = 1, bytes
        call check(buf(i) == pattern(root, i, round), 'bcast: a wrong byte')
      end do
    end do
    round = round + 1
    allocate(send(bytes))
    do i = 1, bytes
      send(i) = pattern(rank, i, round)
    end do
    call MPI_Allgather(send, bytes, MPI_BYTE, buf, bytes, MPI_BYTE, MPI_COMM_WORLD, ierr)
    call check(ierr == MPI_SUCCESS, 'MPI_Allgather')
    do q = 0, n - 1
      do i = 1, bytes
        call check(buf(q * bytes + i) == pattern(q, i, round), 'allgather: a wrong byte')
      end do
    end do
    deallocate(send)
    call MPI_Free_mem(buf, ierr)
    call check(ierr == MPI_SUCCESS, 'MPI_Free_mem')
  end do
  ! 0 bytes: MPI's own memory, freed by MPI.
  total = 0
  call MPI_Alloc_mem(total, MPI_INFO_NULL, base, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Alloc_mem of 0 bytes')
  call c_f_pointer(base, buf, (/ 1 /))
  call MPI_Free_mem(buf, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Free_mem of MPI''s memory')
  call MPI_Finalize(ierr)
  if (rank == 0) print '(a, ": all checks passed at np ", i0)', NAME, n

contains

  ! 0..126: an INTEGER(KIND=1) without overflow.
  integer(kind=1) function pattern(root, i, round)
    integer, intent(in) :: root, i, round
    pattern = int(mod(root * 31 + mod(i, 101) * 7 + round * 17 + 1, 127), 1)
  end function pattern

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '("[rank ", i0, "] check failed: ", a)', rank, what
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine check
end program pmpi_falloc_mem
