/**
 * `main.ts policy ...`: check a WASM policy module against the ABI, limits and golden vectors,
 * or install it as the active module that running agents hot-swap to.
 *
 *     policy check FILE                     validate; print a JSON report; exit 0 ok, 1 rejected
 *     policy swap FILE [--active PATH]      validate, then atomically replace PATH (default
 *                                           /run/holdfast/policy/active.wasm); a rejected module
 *                                           leaves PATH untouched
 *
 * Options for both: `--budget-ms N` (Maglev build time budget), `--max-pages N` (memory cap),
 * `--vectors DIR` (golden vectors directory).
 *
 * @module
 */
import { log } from "../../lib/log.ts";
import { DEFAULT_LIMITS, type PolicyLimits, PolicyRejectedError } from "./policy_module.ts";
import { validatePolicyModule } from "./validate.ts";
import { loadVectors, VECTORS_DIR } from "./vectors.ts";

/** Where `policy swap` installs a module unless `--active` says otherwise. */
export const DEFAULT_ACTIVE_PATH = "/run/holdfast/policy/active.wasm";

const USAGE = `usage: main.ts policy check FILE [--budget-ms N] [--max-pages N] [--vectors DIR]
       main.ts policy swap FILE [--active PATH] [--budget-ms N] [--max-pages N] [--vectors DIR]`;

interface Parsed {
  command: string;
  file: string;
  active: string;
  limits: PolicyLimits;
  vectors: URL;
}

function parse(args: string[]): Parsed | string {
  const [command, ...rest] = args;
  if (command !== "check" && command !== "swap") {
    return command === undefined ? "missing subcommand" : `unknown subcommand "${command}"`;
  }
  let file: string | undefined;
  let active = DEFAULT_ACTIVE_PATH;
  const limits: PolicyLimits = { ...DEFAULT_LIMITS };
  let vectors = VECTORS_DIR;
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    const value = rest[i + 1];
    const num = () => {
      const n = Number(value);
      if (!Number.isFinite(n) || n <= 0) throw new Error(`${a} needs a positive number`);
      i++;
      return n;
    };
    try {
      if (a === "--budget-ms") limits.buildBudgetMs = num();
      else if (a === "--max-pages") limits.maxMemoryPages = num();
      else if (a === "--active" && value !== undefined && command === "swap") {
        active = value;
        i++;
      } else if (a === "--vectors" && value !== undefined) {
        vectors = new URL(value.endsWith("/") ? value : value + "/", `file://${Deno.cwd()}/`);
        i++;
      } else if (!a.startsWith("--") && file === undefined) file = a;
      else return `unexpected argument "${a}"`;
    } catch (e) {
      return (e as Error).message;
    }
  }
  if (file === undefined) return "missing FILE";
  return { command, file, active, limits, vectors };
}

/** Entry point for `main.ts policy ...`; returns the exit code (0 ok, 1 rejected, 2 usage). */
export async function main(args: string[]): Promise<number> {
  const p = parse(args);
  if (typeof p === "string") {
    console.error(`policy: ${p}\n${USAGE}`);
    return 2;
  }
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(p.file);
  } catch (e) {
    console.error(`policy: cannot read module "${p.file}": ${(e as Error).message}`);
    return 1;
  }
  const vectors = await loadVectors(p.vectors);
  try {
    const { report } = await validatePolicyModule(bytes, vectors, { limits: p.limits });
    if (p.command === "check") {
      console.log(JSON.stringify({ ok: true, file: p.file, ...report }));
      return 0;
    }
    await installAtomically(p.active, bytes);
    log.info("policy module installed", {
      component: "policy",
      file: p.file,
      active: p.active,
      digest: report.digest.slice(0, 16),
      max_build_ms: Number(report.maxBuildMs.toFixed(3)),
    });
    return 0;
  } catch (e) {
    if (!(e instanceof PolicyRejectedError)) throw e;
    const out = { ok: false, file: p.file, reason: e.reason, error: e.message };
    if (p.command === "check") console.log(JSON.stringify(out));
    else log.warn("policy module rejected", { component: "policy", ...out, active: p.active });
    return 1;
  }
}

/** Writes `bytes` beside `path` and renames it over `path`, so readers see old or new, whole. */
export async function installAtomically(path: string, bytes: Uint8Array): Promise<void> {
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) || "/" : ".";
  await Deno.mkdir(dir, { recursive: true });
  const tmp = `${path}.tmp-${Deno.pid}`;
  await Deno.writeFile(tmp, bytes);
  await Deno.rename(tmp, path);
}
