// capture_floor: the least an eBPF recorder must do to keep every byte a program reads. One
// raw tracepoint program on sys_exit copies the bytes each read() of the command returned into a
// BPF ring buffer (16 MiB, as fay's), and one consumer thread looks at the ring every 2 ms, as
// fay's does, and touches every 64-byte line of every record. Nothing is decoded, hashed or
// stored: whatever a recorder costs beyond this is its own work, and writing the bytes to a file
// is measured separately (W2's "storage alone" row).
//
//   capture_floor [--] CMD [ARGS...]
//
// Only the command's own process is followed (W2's reader is one process). Exits with the
// command's status; prints the bytes consumed on stderr. Needs root (bpf()).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RING_BYTES (16u << 20)
#define MAX_READ 4096

#define INSN(c, d, s, o, i) ((struct bpf_insn){(c), (d), (s), (o), (i)})
#define MOV_REG(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD_IMM(d, i) INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define RSH_IMM(d, i) INSN(BPF_ALU64 | BPF_RSH | BPF_K, d, 0, 0, i)
#define LOAD64(d, s, o) INSN(BPF_LDX | BPF_MEM | BPF_DW, d, s, o, 0)
#define STORE64(d, s, o) INSN(BPF_STX | BPF_MEM | BPF_DW, d, s, o, 0)
#define CALL(f) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define JUMP_IMM(op, d, i, o) INSN(BPF_JMP | (op) | BPF_K, d, 0, o, i)
#define EXIT INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

// struct pt_regs on x86-64: where the saved syscall number and the second argument sit.
#define PT_REGS_SI 104
#define PT_REGS_ORIG_AX 120
// fp-8 = the saved user register at `off` in the pt_regs of ctx (r6); 6 instructions.
#define READ_PT_REG(off)                                                           \
  MOV_REG(1, 10), ADD_IMM(1, -8), MOV_IMM(2, 8), LOAD64(3, 6, 0), ADD_IMM(3, off), \
      CALL(BPF_FUNC_probe_read_kernel)

static volatile int stopping;
static uint64_t consumed, touched;

static int touch(void* ctx, void* data, size_t n) {
  (void)ctx;
  const volatile uint8_t* p = data;
  for (size_t i = 0; i < n; i += 64) touched += p[i];
  consumed += n;
  return 0;
}

static void* consume(void* arg) {
  struct ring_buffer* rb = arg;
  while (!stopping) {
    struct timespec pause = {0, 2000000};
    nanosleep(&pause, NULL);
    ring_buffer__consume(rb);
  }
  ring_buffer__consume(rb);
  return NULL;
}

int main(int argc, char** argv) {
  int first = (argc > 1 && strcmp(argv[1], "--") == 0) ? 2 : 1;
  if (first >= argc) {
    fprintf(stderr, "usage: capture_floor [--] CMD [ARGS...]\n");
    return 2;
  }
  int go[2];
  if (pipe(go) != 0) return perror("pipe"), 1;
  pid_t child = fork();
  if (child < 0) return perror("fork"), 1;
  if (child == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(127);
    execvp(argv[first], argv + first);
    perror(argv[first]);
    _exit(127);
  }
  close(go[0]);
  int ring = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "floor_ring", 0, 0, RING_BYTES, NULL);
  if (ring < 0) return perror("capture_floor: ring buffer"), 1;
  // r6 = ctx (args[0] = pt_regs *, args[1] = return value); r7 = bytes returned; fp-8 = the
  // syscall number, then the buffer's address.
  struct bpf_insn prog[] = {
      MOV_REG(6, 1),
      CALL(BPF_FUNC_get_current_pid_tgid),
      RSH_IMM(0, 32),
      JUMP_IMM(BPF_JNE, 0, child, 31),  // -> exit
      LOAD64(7, 6, 8),
      JUMP_IMM(BPF_JSLT, 7, 1, 29),
      JUMP_IMM(BPF_JGT, 7, MAX_READ, 28),
      READ_PT_REG(PT_REGS_ORIG_AX),
      LOAD64(1, 10, -8),
      JUMP_IMM(BPF_JNE, 1, 0, 20),  // not read(2)
      READ_PT_REG(PT_REGS_SI),
      INSN(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, ring),
      INSN(0, 0, 0, 0, 0),
      MOV_IMM(2, MAX_READ),
      MOV_IMM(3, 0),
      CALL(BPF_FUNC_ringbuf_reserve),
      JUMP_IMM(BPF_JEQ, 0, 0, 8),
      MOV_REG(8, 0),
      MOV_REG(1, 8),
      MOV_REG(2, 7),
      LOAD64(3, 10, -8),
      CALL(BPF_FUNC_probe_read_user),
      MOV_REG(1, 8),
      MOV_IMM(2, BPF_RB_NO_WAKEUP),
      CALL(BPF_FUNC_ringbuf_submit),
      MOV_IMM(0, 0),
      EXIT,
  };
  static char log[1 << 16];
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .log_buf = log, .log_size = sizeof log, .log_level = 1);
  int fd = bpf_prog_load(BPF_PROG_TYPE_RAW_TRACEPOINT, "capture_floor", "GPL", prog,
                         sizeof prog / sizeof prog[0], &opts);
  if (fd < 0) {
    fprintf(stderr, "capture_floor: the verifier refused the program:\n%s\n", log);
    return 1;
  }
  int link = bpf_raw_tracepoint_open("sys_exit", fd);
  if (link < 0) return perror("capture_floor: attach to sys_exit"), 1;
  struct ring_buffer* rb = ring_buffer__new(ring, touch, NULL, NULL);
  if (!rb) return perror("capture_floor: map the ring buffer"), 1;
  pthread_t consumer;
  if (pthread_create(&consumer, NULL, consume, rb) != 0) return perror("pthread_create"), 1;
  if (write(go[1], "x", 1) != 1) return perror("capture_floor: release the command"), 1;
  int status = 0;
  waitpid(child, &status, 0);
  close(link);
  stopping = 1;
  pthread_join(consumer, NULL);
  fprintf(stderr, "capture_floor: %llu bytes consumed\n", (unsigned long long)consumed);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
