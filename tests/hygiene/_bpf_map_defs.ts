/**
 * The map definitions a built BPF object declares (type, key and value size, default max
 * entries, flags; an inner map's too), read with libbpf's `bpf_object__open_file` — opened, never
 * loaded, so no privilege is needed. For the pinned-maps format's golden (formats_test.ts).
 *
 * @module
 */
import { bpf } from "../../node/bpf/_ffi.ts";

/** One line per map of `object` named in `names`, in that order: `name type=… key=… …`. */
export function mapDefinitions(object: string, names: readonly string[]): string[] {
  const lib = bpf();
  const obj = lib.bpf_object__open_file(new TextEncoder().encode(object + "\0"), null);
  if (obj === null) throw new Error(`Cannot open BPF object "${object}" (run ./hf build)`);
  try {
    const found = new Map<string, string>();
    const describe = (m: Deno.PointerObject): string =>
      `type=${lib.bpf_map__type(m)} key=${lib.bpf_map__key_size(m)} ` +
      `value=${lib.bpf_map__value_size(m)} max_entries=${lib.bpf_map__max_entries(m)} ` +
      `flags=0x${lib.bpf_map__map_flags(m).toString(16)}`;
    for (
      let m = lib.bpf_object__next_map(obj, null);
      m !== null;
      m = lib.bpf_object__next_map(obj, m)
    ) {
      const name = new Deno.UnsafePointerView(lib.bpf_map__name(m)!).getCString();
      const inner = lib.bpf_map__inner_map(m);
      found.set(name, describe(m) + (inner === null ? "" : ` inner(${describe(inner)})`));
    }
    return names.map((n) => {
      const d = found.get(n);
      if (d === undefined) throw new Error(`BPF object "${object}" declares no map "${n}"`);
      return `${n} ${d}`;
    });
  } finally {
    lib.bpf_object__close(obj);
  }
}
