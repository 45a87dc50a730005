/**
 * Attaching programs with libbpf's own calls: XDP (`bpf_xdp_attach`) and tc
 * (`bpf_tc_hook_create` + `bpf_tc_attach`), optionally to an interface inside a network
 * namespace (see netns.ts for how). Attachments outlive the process: an agent restart does not
 * detach anything; the next agent replaces programs atomically — XDP with `XDP_FLAGS_REPLACE`
 * and the program it found as the expected old one (another program put there meanwhile fails
 * the call instead of being overwritten), tc with `BPF_TC_F_REPLACE` on the same handle and
 * priority (cls_bpf swaps the program in one step). Each attachment says what it replaced.
 *
 * @module
 */

import { log } from "../../lib/log.ts";
import { bpf, c } from "./_ffi.ts";
import { check, ERRNO } from "./errors.ts";
import type { BpfProgram } from "./object.ts";
import { ifIndex, inNetns } from "./netns.ts";

/** XDP attach modes. "native" is the driver mode (veth supports it); "generic" is the slow skb mode. */
export type XdpMode = "native" | "generic";

const XDP_FLAGS = { generic: 2, native: 4 } as const;
/** XDP_FLAGS_UPDATE_IF_NOEXIST: attach only when the interface has no program of that mode. */
const XDP_FLAGS_UPDATE_IF_NOEXIST = 1;

/** Where an interface lives. */
export interface IfaceOptions {
  /** Network namespace name (`ip netns` name) or path; default: the current one. */
  readonly netns?: string;
}

/** An XDP attachment; `detach()` removes it. Not disposable on purpose: it must outlive us. */
export interface XdpAttachment {
  readonly ifname: string;
  readonly ifindex: number;
  readonly netns: string | undefined;
  readonly mode: XdpMode;
  /** ID of the program this attachment replaced (0: the interface had none). */
  readonly replacedId: number;
  /** ID of the program now attached. */
  readonly progId: number;
  detach(): void;
}

/** The kernel ID of a loaded program (struct bpf_prog_info.id). */
export function programId(prog: BpfProgram): number {
  const info = new Uint8Array(256);
  const len = new Uint32Array([info.length]);
  check(
    bpf().bpf_obj_get_info_by_fd(prog.fd, info, new Uint8Array(len.buffer)),
    `Cannot read info of program "${prog.name}"`,
  );
  return new DataView(info.buffer).getUint32(4, true);
}

/** struct bpf_xdp_attach_opts { size_t sz; int old_prog_fd; }: the expected old program. */
function xdpOpts(oldProgFd: number): Uint8Array {
  const opts = new Uint8Array(16);
  const v = new DataView(opts.buffer);
  v.setBigUint64(0, 16n, true);
  v.setInt32(8, oldProgFd, true);
  return opts;
}

/**
 * Attaches the XDP program on an interface, or replaces the one there atomically: the program
 * found is passed as the expected old one (`XDP_FLAGS_REPLACE`), so packets meet either the old
 * or the new program and never none, and a program another process attached meanwhile makes the
 * call fail (EEXIST) rather than be overwritten. With none there, attaches only if still none
 * (`XDP_FLAGS_UPDATE_IF_NOEXIST`). Without CAP_SYS_ADMIN (the DaemonSet's capabilities) the old
 * program cannot be opened by ID: the swap is still atomic, without that check (logged).
 */
export function attachXdp(
  prog: BpfProgram,
  ifname: string,
  options: IfaceOptions & { mode?: XdpMode } = {},
): XdpAttachment {
  const mode = options.mode ?? "native";
  const flags = XDP_FLAGS[mode];
  const where = `${ifname}${options.netns ? ` in netns "${options.netns}"` : ""}`;
  const progId = programId(prog);
  const [ifindex, replacedId] = inNetns(options.netns, () => {
    const idx = ifIndex(ifname);
    const oldId = queryXdp(idx, flags, where);
    if (oldId === 0 || oldId === progId) {
      check(
        bpf().bpf_xdp_attach(
          idx,
          prog.fd,
          flags | (oldId === 0 ? XDP_FLAGS_UPDATE_IF_NOEXIST : 0),
          null,
        ),
        `Cannot attach XDP program "${prog.name}" (${mode}) to ${where}`,
      );
      return [idx, oldId];
    }
    const oldFd = bpf().bpf_prog_get_fd_by_id(oldId);
    if (oldFd === -ERRNO.EPERM) {
      // Opening a program by ID needs CAP_SYS_ADMIN, which the DaemonSet does not grant (BPF,
      // NET_ADMIN, PERFMON): the kernel still swaps atomically, without the expected-program check.
      log.info("replacing XDP program without the expected-program check", {
        ifname: where,
        old_id: oldId,
        why: "opening it by ID needs CAP_SYS_ADMIN",
      });
      check(
        bpf().bpf_xdp_attach(idx, prog.fd, flags, null),
        `Cannot replace XDP program ${oldId} on ${where} with "${prog.name}" (${mode})`,
      );
      return [idx, oldId];
    }
    if (oldFd < 0) {
      check(oldFd, `Cannot open XDP program ${oldId} on ${where} to replace it`);
    }
    try {
      check(
        bpf().bpf_xdp_attach(idx, prog.fd, flags, xdpOpts(oldFd)),
        `Cannot replace XDP program ${oldId} on ${where} with "${prog.name}" (${mode}; ` +
          `EEXIST: another program was attached meanwhile)`,
      );
    } finally {
      c().close(oldFd);
    }
    return [idx, oldId];
  });
  return {
    ifname,
    ifindex,
    netns: options.netns,
    mode,
    replacedId,
    progId,
    detach: () =>
      inNetns(options.netns, () => {
        check(bpf().bpf_xdp_detach(ifindex, flags, null), `Cannot detach XDP from ${where}`);
      }),
  };
}

function queryXdp(ifindex: number, flags: number, where: string): number {
  const id = new Uint32Array(1);
  check(
    bpf().bpf_xdp_query_id(ifindex, flags, new Uint8Array(id.buffer)),
    `Cannot query XDP program of ${where}`,
  );
  return id[0] ?? 0;
}

/** ID of the XDP program attached to an interface (0 when none). */
export function xdpProgramId(
  ifname: string,
  options: IfaceOptions & { mode?: XdpMode } = {},
): number {
  return inNetns(
    options.netns,
    () => queryXdp(ifIndex(ifname), XDP_FLAGS[options.mode ?? "native"], ifname),
  );
}

/** tc attach point. */
export type TcDirection = "ingress" | "egress";

/** A tc attachment; `detach()` removes the filter (the clsact qdisc stays). */
export interface TcAttachment {
  readonly ifname: string;
  readonly direction: TcDirection;
  /** ID of the program this filter held before (0: a new filter). */
  readonly replacedId: number;
  /** ID of the program now attached. */
  readonly progId: number;
  detach(): void;
}

function tcHook(ifindex: number, direction: TcDirection): Uint8Array {
  const hook = new Uint8Array(24);
  const v = new DataView(hook.buffer);
  v.setBigUint64(0, 24n, true);
  v.setInt32(8, ifindex, true);
  v.setUint32(12, direction === "ingress" ? 1 : 2, true);
  return hook;
}

/** Handle and priority of Holdfast's tc filters unless a caller picks others. */
const TC_FILTER = { handle: 1, priority: 1 } as const;

function tcOpts(progFd: number, flags: number, filter: TcFilter = TC_FILTER): Uint8Array {
  const opts = new Uint8Array(32);
  const v = new DataView(opts.buffer);
  v.setBigUint64(0, 32n, true);
  v.setInt32(8, progFd, true);
  v.setUint32(12, flags, true);
  v.setUint32(20, filter.handle, true); // handle
  v.setUint32(24, filter.priority, true); // priority
  return opts;
}

/** ID of the program of filter `filter` on `hook` (0: no such filter or no qdisc). */
function tcProgramIdAt(hook: Uint8Array, filter: TcFilter): number {
  const opts = tcOpts(0, 0, filter);
  const r = bpf().bpf_tc_query(hook, opts);
  if (r === -ERRNO.ENOENT || r === -ERRNO.EINVAL) return 0;
  check(r, `Cannot query tc filter ${filter.handle}/${filter.priority}`);
  return new DataView(opts.buffer).getUint32(16, true);
}

/**
 * Clsact qdiscs this process created (netns and ifindex), with the hooks it has attached to since:
 * the others are known to be empty. A qdisc made again (the interface re-created) starts afresh.
 */
const freshQdiscs = new Map<string, Set<TcDirection>>();

/** A tc filter's handle and priority: a program shares a hook with others (a CNI's) by its own. */
export interface TcFilter {
  readonly handle: number;
  readonly priority: number;
}

/**
 * Attaches a tc (cls_bpf, direct-action) program on ingress or egress, creating the clsact
 * qdisc if needed and replacing a previous Holdfast filter (handle 1, priority 1).
 */
export function attachTc(
  prog: BpfProgram,
  ifname: string,
  options: IfaceOptions & {
    /** Which hook: tc ingress or egress. */
    direction: TcDirection;
    /** Create the clsact qdisc first (default true; EEXIST is fine but libbpf logs it). */
    createQdisc?: boolean;
    /** Handle and priority of the filter (default 1 and 1). */
    filter?: TcFilter;
  },
): TcAttachment {
  const filter = options.filter ?? TC_FILTER;
  const direction = options.direction;
  const where = `${ifname} ${direction}${options.netns ? ` in netns "${options.netns}"` : ""}`;
  const progId = programId(prog);
  const [ifindex, replacedId] = inNetns(options.netns, () => {
    const idx = ifIndex(ifname);
    const hook = tcHook(idx, direction);
    // A hook of a qdisc made just now has no filter: no query (libbpf prints the kernel's
    // "Cannot find specified filter chain" for an empty hook), for either direction.
    // A qdisc this process made is not made again (libbpf prints the kernel's "Exclusivity flag
    // on" for EEXIST); should it be gone meanwhile, the attach fails and it is made then.
    const key = `${options.netns ?? ""}|${idx}`;
    const create = () => {
      const r = bpf().bpf_tc_hook_create(hook);
      if (r < 0 && r !== -ERRNO.EEXIST) check(r, `Cannot create clsact qdisc on ${where}`);
      if (r === 0) freshQdiscs.set(key, new Set());
    };
    const known = freshQdiscs.has(key);
    if ((options.createQdisc ?? true) && !known) create();
    const fresh = freshQdiscs.get(key);
    const oldId = fresh && !fresh.has(direction) ? 0 : tcProgramIdAt(hook, filter);
    const attach = () =>
      bpf().bpf_tc_attach(hook, tcOpts(prog.fd, 1, /* BPF_TC_F_REPLACE */ filter));
    let r = attach();
    if (r < 0 && known && (options.createQdisc ?? true)) {
      freshQdiscs.delete(key);
      create();
      r = attach();
    }
    check(r, `Cannot attach tc program "${prog.name}" to ${where}`);
    fresh?.add(direction);
    return [idx, oldId];
  });
  return {
    ifname,
    direction,
    replacedId,
    progId,
    detach: () =>
      inNetns(options.netns, () => {
        check(
          bpf().bpf_tc_detach(tcHook(ifindex, direction), tcOpts(0, 0, filter)),
          `Cannot detach tc program from ${where}`,
        );
      }),
  };
}

/**
 * Logs what an attach did: `replaced program on IF` (with the old and new program IDs) or
 * `attached program on IF` when the hook had none.
 */
export function logAttach(
  a: { ifname: string; replacedId: number; progId: number; direction?: TcDirection },
  hook: "xdp" | "tc",
  ms: number,
): void {
  const where = a.direction ? `${a.ifname} ${a.direction}` : a.ifname;
  const what = a.replacedId === 0 ? "attached" : "replaced";
  log.info(`${what} program on ${where}`, {
    component: "bpf",
    hook,
    iface: a.ifname,
    ...(a.direction ? { direction: a.direction } : {}),
    old_prog_id: a.replacedId,
    prog_id: a.progId,
    ms: Math.round(ms * 100) / 100,
  });
}
