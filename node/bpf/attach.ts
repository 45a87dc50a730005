/**
 * Attaching programs with libbpf's own calls: XDP (`bpf_xdp_attach`) and tc
 * (`bpf_tc_hook_create` + `bpf_tc_attach`), optionally to an interface inside a network
 * namespace (see netns.ts for how). Attachments outlive the process: an agent restart does not
 * detach anything; the next agent replaces programs atomically.
 *
 * @module
 */

import { bpf } from "./_ffi.ts";
import { check, ERRNO } from "./errors.ts";
import type { BpfProgram } from "./object.ts";
import { ifIndex, inNetns } from "./netns.ts";

/** XDP attach modes. "native" is the driver mode (veth supports it); "generic" is the slow skb mode. */
export type XdpMode = "native" | "generic";

const XDP_FLAGS = { generic: 2, native: 4 } as const;

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
  detach(): void;
}

/** Attaches (or atomically replaces) the XDP program on an interface. */
export function attachXdp(
  prog: BpfProgram,
  ifname: string,
  options: IfaceOptions & { mode?: XdpMode } = {},
): XdpAttachment {
  const mode = options.mode ?? "native";
  const flags = XDP_FLAGS[mode];
  const where = `${ifname}${options.netns ? ` in netns "${options.netns}"` : ""}`;
  const ifindex = inNetns(options.netns, () => {
    const idx = ifIndex(ifname);
    check(
      bpf().bpf_xdp_attach(idx, prog.fd, flags, null),
      `Cannot attach XDP program "${prog.name}" (${mode}) to ${where}`,
    );
    return idx;
  });
  return {
    ifname,
    ifindex,
    netns: options.netns,
    mode,
    detach: () =>
      inNetns(options.netns, () => {
        check(bpf().bpf_xdp_detach(ifindex, flags, null), `Cannot detach XDP from ${where}`);
      }),
  };
}

/** ID of the XDP program attached to an interface (0 when none). */
export function xdpProgramId(
  ifname: string,
  options: IfaceOptions & { mode?: XdpMode } = {},
): number {
  return inNetns(options.netns, () => {
    const id = new Uint32Array(1);
    check(
      bpf().bpf_xdp_query_id(
        ifIndex(ifname),
        XDP_FLAGS[options.mode ?? "native"],
        new Uint8Array(id.buffer),
      ),
      `Cannot query XDP program of ${ifname}`,
    );
    return id[0] ?? 0;
  });
}

/** tc attach point. */
export type TcDirection = "ingress" | "egress";

/** A tc attachment; `detach()` removes the filter (the clsact qdisc stays). */
export interface TcAttachment {
  readonly ifname: string;
  readonly direction: TcDirection;
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
  const ifindex = inNetns(options.netns, () => {
    const idx = ifIndex(ifname);
    const hook = tcHook(idx, direction);
    if (options.createQdisc ?? true) {
      const r = bpf().bpf_tc_hook_create(hook);
      if (r < 0 && r !== -ERRNO.EEXIST) check(r, `Cannot create clsact qdisc on ${where}`);
    }
    check(
      bpf().bpf_tc_attach(hook, tcOpts(prog.fd, 1, /* BPF_TC_F_REPLACE */ filter)),
      `Cannot attach tc program "${prog.name}" to ${where}`,
    );
    return idx;
  });
  return {
    ifname,
    direction,
    detach: () =>
      inNetns(options.netns, () => {
        check(
          bpf().bpf_tc_detach(tcHook(ifindex, direction), tcOpts(0, 0, filter)),
          `Cannot detach tc program from ${where}`,
        );
      }),
  };
}
