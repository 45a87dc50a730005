/**
 * The map definitions a built BPF object declares (type, key and value size, default max
 * entries, flags; an inner map's too), read with libbpf's `bpf_object__open_file` — opened, never
 * loaded, so no privilege is needed. For the pinned-maps format's golden (formats_test.ts).
 *
 * @module
 */
import { libbpfPath } from "../../node/bpf/_ffi.ts";

const SYMBOLS = {
  bpf_object__open_file: { parameters: ["buffer", "pointer"], result: "pointer" },
  bpf_object__close: { parameters: ["pointer"], result: "void" },
  bpf_object__next_map: { parameters: ["pointer", "pointer"], result: "pointer" },
  bpf_map__name: { parameters: ["pointer"], result: "pointer" },
  bpf_map__type: { parameters: ["pointer"], result: "i32" },
  bpf_map__key_size: { parameters: ["pointer"], result: "u32" },
  bpf_map__value_size: { parameters: ["pointer"], result: "u32" },
  bpf_map__max_entries: { parameters: ["pointer"], result: "u32" },
  bpf_map__map_flags: { parameters: ["pointer"], result: "u32" },
  bpf_map__inner_map: { parameters: ["pointer"], result: "pointer" },
} as const;

/** One line per map of `object` named in `names`, in that order: `name type=… key=… …`. */
export function mapDefinitions(object: string, names: readonly string[]): string[] {
  const lib = Deno.dlopen(libbpfPath(), SYMBOLS);
  try {
    const obj = lib.symbols.bpf_object__open_file(new TextEncoder().encode(object + "\0"), null);
    if (obj === null) throw new Error(`Cannot open BPF object "${object}" (run ./hf build)`);
    try {
      const found = new Map<string, string>();
      const describe = (m: Deno.PointerObject): string =>
        `type=${lib.symbols.bpf_map__type(m)} key=${lib.symbols.bpf_map__key_size(m)} ` +
        `value=${lib.symbols.bpf_map__value_size(m)} max_entries=${
          lib.symbols.bpf_map__max_entries(m)
        } flags=0x${lib.symbols.bpf_map__map_flags(m).toString(16)}`;
      for (
        let m = lib.symbols.bpf_object__next_map(obj, null);
        m !== null;
        m = lib.symbols.bpf_object__next_map(obj, m)
      ) {
        const name = new Deno.UnsafePointerView(lib.symbols.bpf_map__name(m)!).getCString();
        const inner = lib.symbols.bpf_map__inner_map(m);
        found.set(name, describe(m) + (inner === null ? "" : ` inner(${describe(inner)})`));
      }
      return names.map((n) => {
        const d = found.get(n);
        if (d === undefined) throw new Error(`BPF object "${object}" declares no map "${n}"`);
        return `${n} ${d}`;
      });
    } finally {
      lib.symbols.bpf_object__close(obj);
    }
  } finally {
    lib.close();
  }
}
