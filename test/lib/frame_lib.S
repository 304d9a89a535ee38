/* SPDX-License-Identifier: MIT */
/* Part of the "prof" test: frame_alloc(n) returns malloc(n), built twice
 * (FRAME_B or not) with the call at the same offset but different frames:
 * A's on a frame pointer, B's 8 KiB below the stack pointer.  Loaded one
 * after the other at the same address, B's return address is A's, and a
 * stack walk by A's rule there skips B's caller.  A's destructor calls it
 * too, as dlclose unloads A. */
#if defined(__x86_64__)
	.file "frame_lib.S"	/* not the assembler's temporary name: builds compare */
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
/* A's destructor takes a block through frame_alloc as dlclose unloads it:
 * the walk of that sample keeps A's rule for the call's return address
 * (B has it too, not called, so that frame_alloc lies at the same place). */
	.type frame_fini, @function
frame_fini:
	.cfi_startproc
	sub $8, %rsp
	.cfi_def_cfa_offset 16
	mov $0x300000, %edi
	call frame_alloc@PLT
	mov %rax, %rdi
	call free@PLT
	add $8, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size frame_fini, .-frame_fini
#ifndef FRAME_B
	.section .fini_array, "aw"
	.balign 8
	.quad frame_fini
#endif
#endif
	.section .note.GNU-stack, "", %progbits
