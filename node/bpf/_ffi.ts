/**
 * Raw FFI bindings: one symbols table for libbpf.so.1 and one for libc, the single place node/
 * opens each library (the BPF layer, the conntrack netlink socket, gratuitous ARP and the bird
 * process checks all call through {@linkcode c}). C parameter names are in the comments.
 * The library paths can be overridden with `HOLDFAST_LIBBPF` (e.g. a libbpf built from source)
 * and `HOLDFAST_LIBC`.
 *
 * Private to node/: the BPF layer's typed wrappers are in the sibling files; node/conntrack,
 * node/egress and node/bgp use the libc half directly.
 *
 * @module
 */

/** libbpf 1.x symbols used by Holdfast. */
export const LIBBPF_SYMBOLS = {
  // struct bpf_object *bpf_object__open_file(const char *path, const struct bpf_object_open_opts *opts)
  bpf_object__open_file: { parameters: ["buffer", "pointer"], result: "pointer" },
  // int bpf_object__load(struct bpf_object *obj)
  bpf_object__load: { parameters: ["pointer"], result: "i32" },
  // void bpf_object__close(struct bpf_object *obj)
  bpf_object__close: { parameters: ["pointer"], result: "void" },
  // struct bpf_program *bpf_object__find_program_by_name(const struct bpf_object *obj, const char *name)
  bpf_object__find_program_by_name: { parameters: ["pointer", "buffer"], result: "pointer" },
  // struct bpf_map *bpf_object__find_map_by_name(const struct bpf_object *obj, const char *name)
  bpf_object__find_map_by_name: { parameters: ["pointer", "buffer"], result: "pointer" },
  // struct bpf_map *bpf_object__next_map(const struct bpf_object *obj, const struct bpf_map *map)
  bpf_object__next_map: { parameters: ["pointer", "pointer"], result: "pointer" },
  // struct bpf_program *bpf_object__next_program(const struct bpf_object *obj, struct bpf_program *prog)
  bpf_object__next_program: { parameters: ["pointer", "pointer"], result: "pointer" },
  // int bpf_program__fd(const struct bpf_program *prog)
  bpf_program__fd: { parameters: ["pointer"], result: "i32" },
  // const char *bpf_program__name(const struct bpf_program *prog)
  bpf_program__name: { parameters: ["pointer"], result: "pointer" },
  // int bpf_map__fd(const struct bpf_map *map)
  bpf_map__fd: { parameters: ["pointer"], result: "i32" },
  // const char *bpf_map__name(const struct bpf_map *map)
  bpf_map__name: { parameters: ["pointer"], result: "pointer" },
  // int bpf_map__set_pin_path(struct bpf_map *map, const char *path)
  bpf_map__set_pin_path: { parameters: ["pointer", "buffer"], result: "i32" },
  // int bpf_map__reuse_fd(struct bpf_map *map, int fd)
  bpf_map__reuse_fd: { parameters: ["pointer", "i32"], result: "i32" },
  // int bpf_map__set_max_entries(struct bpf_map *map, __u32 max_entries)
  bpf_map__set_max_entries: { parameters: ["pointer", "u32"], result: "i32" },
  // bool bpf_map__is_pinned(const struct bpf_map *map)
  bpf_map__is_pinned: { parameters: ["pointer"], result: "bool" },
  // Map definitions as declared (tests/hygiene's pinned-maps golden reads them from an opened,
  // never loaded, object): enum bpf_map_type bpf_map__type(const struct bpf_map *map), and the
  // __u32 key_size, value_size, max_entries, map_flags getters; the inner map's template.
  bpf_map__type: { parameters: ["pointer"], result: "i32" },
  bpf_map__key_size: { parameters: ["pointer"], result: "u32" },
  bpf_map__value_size: { parameters: ["pointer"], result: "u32" },
  bpf_map__max_entries: { parameters: ["pointer"], result: "u32" },
  bpf_map__map_flags: { parameters: ["pointer"], result: "u32" },
  // struct bpf_map *bpf_map__inner_map(struct bpf_map *map)
  bpf_map__inner_map: { parameters: ["pointer"], result: "pointer" },
  // int bpf_obj_get(const char *pathname)
  bpf_obj_get: { parameters: ["buffer"], result: "i32" },
  // int bpf_obj_pin(int fd, const char *pathname)
  bpf_obj_pin: { parameters: ["i32", "buffer"], result: "i32" },
  // int bpf_map_lookup_elem(int fd, const void *key, void *value)
  bpf_map_lookup_elem: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  // int bpf_map_update_elem(int fd, const void *key, const void *value, __u64 flags)
  bpf_map_update_elem: { parameters: ["i32", "buffer", "buffer", "u64"], result: "i32" },
  // int bpf_map_delete_elem(int fd, const void *key)
  bpf_map_delete_elem: { parameters: ["i32", "buffer"], result: "i32" },
  // int bpf_map_get_next_key(int fd, const void *key, void *next_key)
  bpf_map_get_next_key: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  // int bpf_map_lookup_batch(int fd, void *in_batch, void *out_batch, void *keys, void *values,
  //                          __u32 *count, const struct bpf_map_batch_opts *opts)
  bpf_map_lookup_batch: {
    parameters: ["i32", "buffer", "buffer", "buffer", "buffer", "buffer", "buffer"],
    result: "i32",
  },
  // int bpf_map_update_batch(int fd, const void *keys, const void *values, __u32 *count,
  //                          const struct bpf_map_batch_opts *opts)
  bpf_map_update_batch: {
    parameters: ["i32", "buffer", "buffer", "buffer", "buffer"],
    result: "i32",
  },
  // int bpf_map_delete_batch(int fd, const void *keys, __u32 *count,
  //                          const struct bpf_map_batch_opts *opts)
  bpf_map_delete_batch: { parameters: ["i32", "buffer", "buffer", "buffer"], result: "i32" },
  // int bpf_map_create(enum bpf_map_type map_type, const char *map_name, __u32 key_size,
  //                    __u32 value_size, __u32 max_entries, const struct bpf_map_create_opts *opts)
  bpf_map_create: {
    parameters: ["u32", "buffer", "u32", "u32", "u32", "buffer"],
    result: "i32",
  },
  // bpf_map_create on a blocking-pool thread (BpfMap.createAsync: tables created ahead of use)
  bpf_map_create_nonblocking: {
    name: "bpf_map_create",
    parameters: ["u32", "buffer", "u32", "u32", "u32", "buffer"],
    result: "i32",
    nonblocking: true,
  },
  // int bpf_map_get_fd_by_id(__u32 id)
  bpf_map_get_fd_by_id: { parameters: ["u32"], result: "i32" },
  // int bpf_obj_get_info_by_fd(int bpf_fd, void *info, __u32 *info_len)
  bpf_obj_get_info_by_fd: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  // int bpf_xdp_attach(int ifindex, int prog_fd, __u32 flags, const struct bpf_xdp_attach_opts *opts)
  bpf_xdp_attach: { parameters: ["i32", "i32", "u32", "buffer"], result: "i32" },
  // int bpf_xdp_detach(int ifindex, __u32 flags, const struct bpf_xdp_attach_opts *opts)
  bpf_xdp_detach: { parameters: ["i32", "u32", "buffer"], result: "i32" },
  // int bpf_xdp_query_id(int ifindex, int flags, __u32 *prog_id)
  bpf_xdp_query_id: { parameters: ["i32", "i32", "buffer"], result: "i32" },
  // int bpf_prog_get_fd_by_id(__u32 id)
  bpf_prog_get_fd_by_id: { parameters: ["u32"], result: "i32" },
  // int bpf_tc_query(const struct bpf_tc_hook *hook, struct bpf_tc_opts *opts)
  bpf_tc_query: { parameters: ["buffer", "buffer"], result: "i32" },
  // int bpf_tc_hook_create(struct bpf_tc_hook *hook)
  bpf_tc_hook_create: { parameters: ["buffer"], result: "i32" },
  // int bpf_tc_hook_destroy(struct bpf_tc_hook *hook)
  bpf_tc_hook_destroy: { parameters: ["buffer"], result: "i32" },
  // int bpf_tc_attach(const struct bpf_tc_hook *hook, struct bpf_tc_opts *opts)
  bpf_tc_attach: { parameters: ["buffer", "buffer"], result: "i32" },
  // int bpf_tc_detach(const struct bpf_tc_hook *hook, const struct bpf_tc_opts *opts)
  bpf_tc_detach: { parameters: ["buffer", "buffer"], result: "i32" },
  // int bpf_prog_test_run_opts(int prog_fd, struct bpf_test_run_opts *opts)
  bpf_prog_test_run_opts: { parameters: ["i32", "buffer"], result: "i32" },
  // struct ring_buffer *ring_buffer__new(int map_fd, ring_buffer_sample_fn sample_cb, void *ctx,
  //                                      const struct ring_buffer_opts *opts)
  ring_buffer__new: { parameters: ["i32", "function", "pointer", "pointer"], result: "pointer" },
  // int ring_buffer__consume(struct ring_buffer *rb)
  ring_buffer__consume: { parameters: ["pointer"], result: "i32" },
  // int ring_buffer__epoll_fd(const struct ring_buffer *rb)
  ring_buffer__epoll_fd: { parameters: ["pointer"], result: "i32" },
  // void ring_buffer__free(struct ring_buffer *rb)
  ring_buffer__free: { parameters: ["pointer"], result: "void" },
  // int libbpf_strerror(int err, char *buf, size_t size)
  libbpf_strerror: { parameters: ["i32", "buffer", "usize"], result: "i32" },
  // int libbpf_num_possible_cpus(void)
  libbpf_num_possible_cpus: { parameters: [], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/**
 * libc symbols: errno, fds, files, mmap, namespaces, interfaces, epoll, sockets, processes, CPU
 * affinity — the union of what node/ and its tests need, opened once.
 */
export const LIBC_SYMBOLS = {
  // int *__errno_location(void)
  __errno_location: { parameters: [], result: "pointer" },
  // char *strerror(int errnum)
  strerror: { parameters: ["i32"], result: "pointer" },
  // int open(const char *pathname, int flags)
  open: { parameters: ["buffer", "i32"], result: "i32" },
  // ssize_t read(int fd, void *buf, size_t count)
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  // int close(int fd)
  close: { parameters: ["i32"], result: "i32" },
  // ssize_t readlink(const char *pathname, char *buf, size_t bufsiz)
  readlink: { parameters: ["buffer", "buffer", "usize"], result: "isize" },
  // int setns(int fd, int nstype)
  setns: { parameters: ["i32", "i32"], result: "i32" },
  // int mkdir(const char *pathname, mode_t mode)
  mkdir: { parameters: ["buffer", "u32"], result: "i32" },
  // int unlink(const char *pathname)
  unlink: { parameters: ["buffer"], result: "i32" },
  // int rename(const char *oldpath, const char *newpath)
  rename: { parameters: ["buffer", "buffer"], result: "i32" },
  // int rmdir(const char *pathname)
  rmdir: { parameters: ["buffer"], result: "i32" },
  // int statfs(const char *path, struct statfs *buf)
  statfs: { parameters: ["buffer", "buffer"], result: "i32" },
  // int clock_gettime(clockid_t clockid, struct timespec *tp)
  clock_gettime: { parameters: ["i32", "buffer"], result: "i32" },
  // void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
  mmap: { parameters: ["pointer", "usize", "i32", "i32", "i32", "i64"], result: "pointer" },
  // int munmap(void *addr, size_t length)
  munmap: { parameters: ["pointer", "usize"], result: "i32" },
  // unsigned int if_nametoindex(const char *ifname)
  if_nametoindex: { parameters: ["buffer"], result: "u32" },
  // int ioctl(int fd, unsigned long request, void *argp)
  ioctl: { parameters: ["i32", "u64", "buffer"], result: "i32" },
  // int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
  // nonblocking: runs on a worker thread so waiting never blocks the event loop
  epoll_wait: { parameters: ["i32", "buffer", "i32", "i32"], result: "i32", nonblocking: true },
  // int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
  epoll_ctl: { parameters: ["i32", "i32", "i32", "buffer"], result: "i32" },
  // int eventfd(unsigned int initval, int flags)
  eventfd: { parameters: ["u32", "i32"], result: "i32" },
  // ssize_t write(int fd, const void *buf, size_t count)
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  // int socket(int domain, int type, int protocol)
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  // int bind(int sockfd, const struct sockaddr *addr, socklen_t addrlen)
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  // int setsockopt(int sockfd, int level, int optname, const void *optval, socklen_t optlen)
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  // ssize_t sendto(int sockfd, const void *buf, size_t len, int flags,
  //                const struct sockaddr *dest_addr, socklen_t addrlen)
  sendto: { parameters: ["i32", "buffer", "usize", "i32", "buffer", "u32"], result: "isize" },
  // sendto on a worker thread: the kernel processes a netlink request inside sendto, so the
  // caller's thread can prepare the next batch meanwhile
  sendtoAsync: {
    name: "sendto",
    parameters: ["i32", "buffer", "usize", "i32", "buffer", "u32"],
    result: "isize",
    nonblocking: true,
  },
  // ssize_t recv(int sockfd, void *buf, size_t len, int flags)
  recv: { parameters: ["i32", "buffer", "usize", "i32"], result: "isize" },
  // int kill(pid_t pid, int sig)
  kill: { parameters: ["i32", "i32"], result: "i32" },
  // int sched_setaffinity(pid_t pid, size_t cpusetsize, const cpu_set_t *mask)
  sched_setaffinity: { parameters: ["i32", "usize", "buffer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

type Libbpf = Deno.DynamicLibrary<typeof LIBBPF_SYMBOLS>["symbols"];
type Libc = Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"];

let libbpf: Libbpf | undefined;
let libc: Libc | undefined;

/** Path of libbpf: `HOLDFAST_LIBBPF` or the soname `libbpf.so.1`. */
export function libbpfPath(): string {
  return Deno.env.get("HOLDFAST_LIBBPF") || "libbpf.so.1";
}

/** The libbpf symbols, opening the library on first use. */
export function bpf(): Libbpf {
  if (!libbpf) {
    const path = libbpfPath();
    try {
      libbpf = Deno.dlopen(path, LIBBPF_SYMBOLS).symbols;
    } catch (e) {
      throw new Error(
        `Cannot open libbpf "${path}": ${
          (e as Error).message
        } (install libbpf1 or set HOLDFAST_LIBBPF)`,
        { cause: e },
      );
    }
  }
  return libbpf;
}

/**
 * Path of libc: `HOLDFAST_LIBC` or the soname `libc.so.6`. Read only when the process may read
 * it, so an FFI user without `--allow-env` still gets libc (and no prompt).
 */
export function libcPath(): string {
  const env = Deno.permissions.querySync({ name: "env", variable: "HOLDFAST_LIBC" });
  return (env.state === "granted" && Deno.env.get("HOLDFAST_LIBC")) || "libc.so.6";
}

/** The libc symbols, opening libc on first use (once per process). */
export function c(): Libc {
  if (!libc) {
    const path = libcPath();
    try {
      libc = Deno.dlopen(path, LIBC_SYMBOLS).symbols;
    } catch (e) {
      throw new Error(`Cannot open libc "${path}": ${(e as Error).message}`, { cause: e });
    }
  }
  return libc;
}

/** The calling thread's errno, read right after a failed call. */
export function errno(): number {
  const p = c().__errno_location();
  return p === null ? 0 : new Deno.UnsafePointerView(p).getInt32();
}

/** libc's text for a positive errno, e.g. "No such file or directory" (`errno N` if it has none). */
export function errnoText(code: number): string {
  return readCstr(c().strerror(code)) || `errno ${code}`;
}

/** NUL-terminated UTF-8 bytes for a C string argument. */
export function cstr(text: string): Uint8Array<ArrayBuffer> {
  const bytes = new TextEncoder().encode(text);
  const out = new Uint8Array(bytes.length + 1);
  out.set(bytes);
  return out;
}

/** Reads a C string returned by libbpf or libc (empty for NULL). */
export function readCstr(p: Deno.PointerValue): string {
  return p === null ? "" : new Deno.UnsafePointerView(p).getCString();
}

/** The address of a buffer as a u64 for embedding in an opts struct. */
export function addressOf(buf: Uint8Array | null): bigint {
  if (buf === null || buf.byteLength === 0) return 0n;
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf)));
}

/** CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns(), to compare with flow last_seen. */
export function monotonicNs(): bigint {
  const ts = new BigInt64Array(2);
  c().clock_gettime(1, /* CLOCK_MONOTONIC */ new Uint8Array(ts.buffer));
  return (ts[0] ?? 0n) * 1_000_000_000n + (ts[1] ?? 0n);
}

/**
 * mkdir -p through libc: Deno's own fs API needs --allow-all for anything under /sys, which the
 * bpf permission sets deliberately do not grant.
 */
export function mkdirP(path: string): void {
  let prefix = "";
  for (const part of path.split("/").filter((p) => p !== "")) {
    prefix += `/${part}`;
    if (c().mkdir(cstr(prefix), 0o700) < 0) {
      const e = errno();
      if (e !== 17 /* EEXIST */) throw new Error(`Cannot create directory "${prefix}": errno ${e}`);
    }
  }
}

/** Removes a file (e.g. a pinned map) through libc; false when it did not exist. */
export function unlinkPath(path: string): boolean {
  if (c().unlink(cstr(path)) === 0) return true;
  const e = errno();
  if (e === 2) return false;
  throw new Error(`Cannot remove "${path}": errno ${e}`);
}

/** Renames a file (a pin, within one bpffs) through libc; throws with the errno. */
export function renamePath(from: string, to: string): void {
  if (c().rename(cstr(from), cstr(to)) < 0) {
    throw new Error(`Cannot rename "${from}" to "${to}": errno ${errno()}`);
  }
}

/** Removes an empty directory through libc; false when it did not exist. */
export function rmdirPath(path: string): boolean {
  if (c().rmdir(cstr(path)) === 0) return true;
  const e = errno();
  if (e === 2) return false;
  throw new Error(`Cannot remove directory "${path}": errno ${e}`);
}

/** Whether `path` is on a bpffs mount (statfs f_type == BPF_FS_MAGIC). */
export function isBpffs(path: string): boolean {
  const buf = new BigInt64Array(16);
  if (c().statfs(cstr(path), new Uint8Array(buf.buffer)) < 0) return false;
  return buf[0] === 0xcafe4a11n;
}
