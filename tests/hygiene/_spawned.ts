/**
 * Which programs the project spawns, derived from its sources, and which of them no install step
 * provides. Used by `setup_installs_test.ts`; kept apart so the test can run the same derivation
 * over a fixture tree and show that it finds what it should.
 *
 * Where a spawned program's name is found:
 * - the `run` allow-lists of `deno.json`'s permission sets (Deno refuses any other direct spawn);
 * - allow-run flags with a list, written in sources (child processes with their own lists);
 * - Deno.Command constructed with a string literal;
 * - argv arrays run inside a namespace or host of the lab (the first word of an argv literal
 *   given to an `exec` method after the host), which `ip netns exec` spawns and so no allow-list
 *   names;
 * - the command words of the shell scripts (`hf`, `.ci/run`, `scripts/*.sh`).
 *
 * @module
 */

/** Where each spawned program is named: program → places ("file: how"). */
export type Spawned = Map<string, Set<string>>;

const NAME = /^(?:\.\/)?[a-z][a-z0-9._+-]*$/;

function add(out: Spawned, program: string, where: string): void {
  if (!NAME.test(program)) return;
  let places = out.get(program);
  if (!places) out.set(program, places = new Set());
  places.add(where);
}

/** Files under `root` (relative paths) with one of `exts`, skipping caches, builds and deps. */
export function sourceFiles(root: string, exts: readonly string[]): string[] {
  const skip = new Set([".git", ".cache", "node_modules", "build", "testdata"]);
  const out: string[] = [];
  const walk = (dir: string, rel: string) => {
    for (const e of Deno.readDirSync(dir)) {
      if (skip.has(e.name)) continue;
      const path = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory) walk(`${dir}/${e.name}`, path);
      else if (e.isFile && exts.some((x) => e.name.endsWith(x))) out.push(path);
    }
  };
  walk(root, "");
  return out.sort();
}

/** The programs of every permission set's `run` list in `deno.json` text. */
export function fromPermissionSets(denoJson: string, out: Spawned = new Map()): Spawned {
  const sets = (JSON.parse(denoJson).permissions ?? {}) as Record<string, { run?: unknown }>;
  for (const [name, set] of Object.entries(sets)) {
    if (Array.isArray(set.run)) {
      for (const program of set.run) add(out, String(program), `deno.json: -P=${name} run list`);
    }
  }
  return out;
}

/** Programs named in TypeScript source `text` of `file` (allow-run flags, commands, lab exec). */
export function fromTypeScript(file: string, text: string, out: Spawned = new Map()): Spawned {
  // Comments may quote flags and calls that are not made (line comments and JSDoc lines).
  text = text.replace(/^\s*(\/\/|\/?\*).*$/gm, "").replace(/\s\/\/ .*$/gm, "");
  for (const m of text.matchAll(/--allow-run=([a-z0-9.,_+-]+)/g)) {
    for (const program of m[1]!.split(",")) add(out, program, `${file}: --allow-run`);
  }
  for (const m of text.matchAll(/new Deno\.Command\(\s*"([^"]+)"/g)) {
    add(out, m[1]!, `${file}: new Deno.Command`);
  }
  // `topo.exec("node", ["nft", …])`, `lab.execIn(ns, ["ss", …])`: the first word of the argv.
  for (
    const m of text.matchAll(/\.exec\w*\(\s*(?:"[^"]*"|`[^`]*`|[^,[\]()"`]+),\s*\[\s*"([^"]+)"/g)
  ) {
    add(out, m[1]!, `${file}: run in a lab namespace`);
  }
  return out;
}

// Words that start a command but are the shell's own (keywords, builtins) and words after which
// the real command follows (`exec X`, `timeout N X`).
const SHELL_OWN = new Set(
  ("if then else elif fi do done while until case esac in function select time ! { } [[ ]] [ " +
    "exec command builtin local export return exit shift set source . cd echo printf read true " +
    "false eval trap wait declare readonly unset mapfile readarray break continue test type " +
    "hash pwd let : shopt getopts umask ulimit alias").split(" "),
);
const PREFIXES = new Set(["exec", "command", "builtin", "then", "do", "else", "if", "!", "time"]);

/**
 * Command words of a shell script: the first word of every simple command outside quotes, past
 * assignments and prefixes (`exec`, `timeout N`), less keywords, builtins and the script's own
 * functions. Quoted text is opaque, so commands inside `"$(…)"` are not seen.
 */
export function fromShell(file: string, text: string, out: Spawned = new Map()): Spawned {
  const functions = new Set(
    [...text.matchAll(/^\s*([a-z_][a-z0-9_]*)\s*\(\)/gm)].map((m) => m[1]!),
  );
  text = text
    .replace(/^(\s*)[\w*?.|\s-]+\)(?=\s)/gm, "$1") // case patterns: `demo)`, `-h | --help)`
    .replace(/\$?\(\([^)]*\)\)/g, "0") // arithmetic: $((a + b)), ((i++))
    .replace(/=\([^)]*\)/g, "=0"); // array assignments: a=(x y)
  const commands: string[][] = [[]];
  let word = "";
  let quoted = false;
  const endWord = () => {
    if (word) commands.at(-1)!.push(quoted ? `"${word}` : word);
    word = "";
    quoted = false;
  };
  const endCommand = () => {
    endWord();
    commands.push([]);
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'") {
      const close = text.indexOf(c, i + 1);
      word += text.slice(i + 1, close < 0 ? text.length : close);
      quoted = true;
      i = close < 0 ? text.length : close;
    } else if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      word += text.slice(i + 1, j);
      quoted = true;
      i = j;
    } else if (c === "\\") {
      if (text[i + 1] !== "\n") word += text[i + 1] ?? "";
      i++;
    } else if (c === "#" && word === "") {
      const nl = text.indexOf("\n", i);
      i = (nl < 0 ? text.length : nl) - 1;
    } else if ("\n;|&()`".includes(c)) {
      if (c === "(" && word === "$") word = "";
      endCommand();
    } else if (c === " " || c === "\t") {
      endWord();
    } else {
      word += c;
    }
  }
  endWord();
  for (const words of commands) {
    let k = 0;
    while (k < words.length) {
      const w = words[k]!;
      if (/^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/.test(w)) k++;
      else if (PREFIXES.has(w)) k++;
      else if (w === "timeout") k += 2;
      else break;
    }
    const first = words[k];
    if (first === undefined || first.startsWith('"')) continue;
    if (["for", "case", "select"].includes(words[0] ?? "")) continue;
    if (SHELL_OWN.has(first) || functions.has(first) || first.endsWith(")")) continue;
    add(out, first, `${file}: shell command`);
  }
  return out;
}

/**
 * Every program the tree at `root` spawns, by the rules of this module's doc; `config` names the
 * file with the permission sets (a fixture tree has no `deno.json` of its own, which Deno would
 * take for a workspace member).
 */
export function spawnedPrograms(root: string, config = "deno.json"): Spawned {
  const out: Spawned = new Map();
  fromPermissionSets(Deno.readTextFileSync(`${root}/${config}`), out);
  for (const file of sourceFiles(root, [".ts"])) {
    fromTypeScript(file, Deno.readTextFileSync(`${root}/${file}`), out);
  }
  const scripts = ["hf", ".ci/run", ...sourceFiles(root, [".sh"])];
  for (const file of scripts) {
    try {
      fromShell(file, Deno.readTextFileSync(`${root}/${file}`), out);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
  return out;
}

/** `scripts/packages.txt` parsed: probe → Debian package. */
export function setupProbes(text: string): Map<string, string> {
  const probes = new Map<string, string>();
  for (const line of text.split("\n")) {
    const [probe, pkg, extra] = line.trim().split(/\s+/);
    if (!probe || probe.startsWith("#")) continue;
    if (!pkg || extra !== undefined) {
      throw new Error(`Cannot parse scripts/packages.txt line "${line}": expected "PROBE PACKAGE"`);
    }
    probes.set(probe, pkg);
  }
  return probes;
}

/** A package list file (one name a line, `#` comments) as a set. */
export function packageSet(text: string): Set<string> {
  return new Set(text.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#")));
}

/** What provides a program, as far as the check is concerned. */
export interface Provision {
  /** Commands setup.sh installs when missing (scripts/packages.txt probes), and what setup puts on PATH itself. */
  setup: ReadonlySet<string>;
  /** Packages of the base image. */
  base: ReadonlySet<string>;
  /** The Debian package that owns the installed program, or undefined (not installed / no owner). */
  ownerOf: (program: string) => string | undefined;
}

/** One program nothing provides. */
export interface Unprovided {
  program: string;
  owner: string | undefined;
  where: string[];
}

/**
 * The spawned programs that neither setup installs nor the base image has. `./x` paths are the
 * repository's own files.
 */
export function unprovided(spawned: Spawned, provision: Provision): Unprovided[] {
  const out: Unprovided[] = [];
  for (const [program, places] of [...spawned].sort(([a], [b]) => a.localeCompare(b))) {
    if (program.startsWith("./") || provision.setup.has(program)) continue;
    const owner = provision.ownerOf(program);
    if (owner !== undefined && provision.base.has(owner)) continue;
    out.push({ program, owner, where: [...places].sort() });
  }
  return out;
}

/** Where `program` is on PATH (plus the sbin directories a root shell has), if anywhere. */
export function onPath(program: string): string | undefined {
  const dirs = [...(Deno.env.get("PATH") ?? "").split(":"), "/usr/sbin", "/sbin"];
  for (const dir of dirs.filter(Boolean)) {
    try {
      const info = Deno.statSync(`${dir}/${program}`);
      if (info.isFile && (info.mode ?? 0) & 0o111) return `${dir}/${program}`;
    } catch { /* not here */ }
  }
  return undefined;
}

/**
 * An owner lookup from dpkg's file lists (`/var/lib/dpkg/info/*.list`), read once; `/bin` and
 * `/usr/bin` are the same directory on a merged-/usr system, so both spellings are tried.
 */
export function dpkgOwners(
  infoDir = "/var/lib/dpkg/info",
): (program: string) => string | undefined {
  const owner = new Map<string, string>();
  for (const e of Deno.readDirSync(infoDir)) {
    if (!e.name.endsWith(".list")) continue;
    const pkg = e.name.slice(0, -".list".length).split(":")[0]!;
    for (const line of Deno.readTextFileSync(`${infoDir}/${e.name}`).split("\n")) {
      if (/\/s?bin\/[^/]+$/.test(line)) owner.set(line, pkg);
    }
  }
  return (program) => {
    const path = onPath(program);
    if (path === undefined) return undefined;
    const alt = path.startsWith("/usr/") ? path.slice(4) : `/usr${path}`;
    let found = owner.get(path) ?? owner.get(alt);
    if (found === undefined) {
      try {
        const real = Deno.realPathSync(path);
        found = owner.get(real) ??
          owner.get(real.startsWith("/usr/") ? real.slice(4) : `/usr${real}`);
      } catch { /* dangling */ }
    }
    return found;
  };
}
