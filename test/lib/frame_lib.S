/* SPDX-License-Identifier: MIT */
/* Part of the "prof" test: frame_alloc(n) returns malloc(n), built twice
 * (FRAME_B or not) with the call at the same offset but different frames:
 * A's on a frame pointer, B's 8 KiB below the stack pointer.  Loaded one
 * after the other at the same address, B's return address is A's, and a
 * stack walk by A's rule there skips B's caller. */
#if defined(__x86_64__)
	.text
	.globl frame_alloc
	.type frame_alloc, @function
frame_alloc:
	.cfi_startproc
#ifndef FRAME_B
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	mov %rsp, %rbp
	.cfi_def_cfa_register %rbp
	sub $512, %rsp
	call malloc@PLT
	leave
	.cfi_def_cfa %rsp, 8
#else
	sub $0x2008, %rsp
	.cfi_def_cfa_offset 0x2010
	nop; nop; nop; nop	/* A's push and mov: the call at the same offset */
	call malloc@PLT
	add $0x2008, %rsp
	.cfi_def_cfa_offset 8
#endif
	ret
	.cfi_endproc
	.size frame_alloc, .-frame_alloc
#endif
	.section .note.GNU-stack, "", %progbits
