/**
 * BPF objects and programs: open an ELF object built by bpf/build.ts, optionally pin or reuse its
 * maps in bpffs, load it, find programs and maps by name.
 *
 * @module
 */

import { bpf, c, cstr, errno, readCstr } from "./_ffi.ts";
import { BpfError, check } from "./errors.ts";
import { BpfMap } from "./map.ts";
import { type MapLayout, type PendingMigrations, type PinPlan, planPins } from "./_pin_migrate.ts";

/**
 * A loaded program. From {@linkcode BpfObject.program} its fd belongs to the object (dispose is
 * a no-op); from {@linkcode BpfProgram.fromPinned} this handle owns the fd and dispose closes it.
 */
export class BpfProgram implements Disposable {
  readonly name: string;
  #fd: number;
  readonly #ownsFd: boolean;

  /** Wraps a loaded program's fd; `ownsFd` makes dispose close it. */
  constructor(name: string, fd: number, options: { ownsFd?: boolean } = {}) {
    this.name = name;
    this.#fd = fd;
    this.#ownsFd = options.ownsFd ?? false;
  }

  /** Opens a program pinned in bpffs. */
  static fromPinned(path: string): BpfProgram {
    const fd = bpf().bpf_obj_get(cstr(path));
    if (fd < 0) throw new BpfError(`Cannot open pinned program "${path}"`, -fd);
    return new BpfProgram(path.split("/").pop() ?? path, fd, { ownsFd: true });
  }

  /** The program's file descriptor. */
  get fd(): number {
    if (this.#fd < 0) throw new Error(`Cannot use program "${this.name}": it is closed`);
    return this.#fd;
  }

  /** Pins the program at a bpffs path (it then outlives every fd and attachment). */
  pin(path: string): void {
    check(bpf().bpf_obj_pin(this.fd, cstr(path)), `Cannot pin program "${this.name}" at "${path}"`);
  }

  /** Closes the fd if this handle owns it. */
  [Symbol.dispose](): void {
    if (this.#ownsFd && this.#fd >= 0) c().close(this.#fd);
    this.#fd = -1;
  }
}

/** Options for {@linkcode BpfObject.open}. */
export interface OpenObjectOptions {
  /**
   * bpffs directory to pin maps in. A map already pinned there with a compatible definition is
   * reused (its contents survive); one pinned with another definition fails the load (libbpf
   * refuses to reuse it) unless `migrate` is set; a map not pinned yet is pinned at load.
   */
  readonly pinDir?: string;
  /** Which maps to pin (default: all except `.rodata`/`.bss`-style internal maps). */
  readonly pinMaps?: readonly string[];
  /** Override max_entries of named maps before load. */
  readonly maxEntries?: Readonly<Record<string, number>>;
  /** Existing map fds to reuse for named maps instead of creating them. */
  readonly reuseFds?: Readonly<Record<string, number>>;
  /**
   * With `pinDir`: a pinned map whose layout differs from the object's is migrated instead of
   * failing the load (`_pin_migrate.ts`): filled at load, finished by
   * {@linkcode BpfObject.migrations}' `finish()` once the programs are swapped in.
   */
  readonly migrate?: boolean;
}

/** An opened and loaded BPF object file. Dispose to close it (pinned maps stay in bpffs). */
export class BpfObject implements Disposable {
  #obj: Deno.PointerValue;
  readonly path: string;
  readonly #maps = new Map<string, BpfMap>();
  /** With `migrate`: the pinned maps' decisions and the migrations to finish after the swap. */
  migrations: PendingMigrations | null = null;

  private constructor(obj: Deno.PointerValue, path: string) {
    this.#obj = obj;
    this.path = path;
  }

  /** Opens and loads an object file. Throws BpfError with libbpf's text (and the verifier's log on stderr). */
  static open(path: string, options: OpenObjectOptions = {}): BpfObject {
    const lib = bpf();
    const obj = lib.bpf_object__open_file(cstr(path), null);
    if (obj === null) throw new BpfError(`Cannot open BPF object "${path}"`, errno());
    const self = new BpfObject(obj, path);
    let plan: PinPlan | null = null;
    try {
      for (const [name, n] of Object.entries(options.maxEntries ?? {})) {
        check(
          lib.bpf_map__set_max_entries(self.#rawMap(name), n),
          `Cannot size map "${name}" of "${path}" to ${n}`,
        );
      }
      for (const [name, fd] of Object.entries(options.reuseFds ?? {})) {
        check(
          lib.bpf_map__reuse_fd(self.#rawMap(name), fd),
          `Cannot reuse fd ${fd} for map "${name}" of "${path}"`,
        );
      }
      plan = options.pinDir !== undefined && options.migrate
        ? planPins(options.pinDir, options.pinMaps ?? self.#mapNames(), (n) => self.#layout(n))
        : null;
      if (options.pinDir !== undefined) {
        for (const name of options.pinMaps ?? self.#mapNames()) {
          const pinPath = `${options.pinDir}/${name}`;
          check(
            lib.bpf_map__set_pin_path(self.#rawMap(name), cstr(pinPath)),
            `Cannot set pin path "${pinPath}"`,
          );
        }
      }
      check(lib.bpf_object__load(obj), `Cannot load BPF object "${path}"`);
      self.migrations = plan?.fill((name) => self.map(name)) ?? null;
    } catch (e) {
      self[Symbol.dispose]();
      if (self.migrations === null) plan?.rollback();
      throw e;
    }
    return self;
  }

  #raw(): NonNullable<Deno.PointerValue> {
    if (this.#obj === null) throw new Error(`Cannot use BPF object "${this.path}": it is closed`);
    return this.#obj;
  }

  #rawMap(name: string): NonNullable<Deno.PointerValue> {
    const m = bpf().bpf_object__find_map_by_name(this.#raw(), cstr(name));
    if (m === null) throw new Error(`Cannot find map "${name}" in BPF object "${this.path}"`);
    return m;
  }

  #layout(name: string): MapLayout {
    const m = this.#rawMap(name), lib = bpf();
    return {
      type: lib.bpf_map__type(m),
      keySize: lib.bpf_map__key_size(m),
      valueSize: lib.bpf_map__value_size(m),
      maxEntries: lib.bpf_map__max_entries(m),
      flags: lib.bpf_map__map_flags(m),
    };
  }

  #mapNames(): string[] {
    const names: string[] = [];
    let m: Deno.PointerValue = null;
    for (let i = 0; i < 1000; i++) {
      m = bpf().bpf_object__next_map(this.#raw(), m);
      if (m === null) break;
      const name = readCstr(bpf().bpf_map__name(m));
      if (!name.startsWith(".")) names.push(name);
    }
    return names;
  }

  /** Names of the object's maps. */
  mapNames(): string[] {
    return this.#mapNames();
  }

  /** Names of the object's programs. */
  programNames(): string[] {
    const names: string[] = [];
    let p: Deno.PointerValue = null;
    for (let i = 0; i < 1000; i++) {
      p = bpf().bpf_object__next_program(this.#raw(), p);
      if (p === null) break;
      names.push(readCstr(bpf().bpf_program__name(p)));
    }
    return names;
  }

  /** The loaded program named `name` (the C function name). */
  program(name: string): BpfProgram {
    const p = bpf().bpf_object__find_program_by_name(this.#raw(), cstr(name));
    if (p === null) {
      throw new Error(
        `Cannot find program "${name}" in BPF object "${this.path}" (has: ${
          this.programNames().join(", ")
        })`,
      );
    }
    return new BpfProgram(
      name,
      check(bpf().bpf_program__fd(p), `Cannot get fd of program "${name}"`),
    );
  }

  /** The map named `name`; its fd is owned by this object. */
  map(name: string): BpfMap {
    let m = this.#maps.get(name);
    if (!m) {
      const fd = check(bpf().bpf_map__fd(this.#rawMap(name)), `Cannot get fd of map "${name}"`);
      m = new BpfMap(fd, { ownsFd: false, name });
      this.#maps.set(name, m);
    }
    return m;
  }

  /** Closes the object: programs not attached anywhere and unpinned maps are freed. */
  [Symbol.dispose](): void {
    if (this.#obj !== null) bpf().bpf_object__close(this.#obj);
    this.#obj = null;
    this.#maps.clear();
  }
}
