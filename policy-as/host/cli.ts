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
import {
  type CommandLine,
  intOption,
  numberOption,
  readCommandLine,
  stringOption,
  UsageError,
} from "../../lib/args.ts";
import { log } from "../../lib/log.ts";
import { DEFAULT_LIMITS, type PolicyLimits, PolicyRejectedError } from "./policy_module.ts";
import { validatePolicyModule } from "./validate.ts";
import { loadVectors, VECTORS_DIR } from "./vectors.ts";

/** Where `policy swap` installs a module unless `--active` says otherwise. */
export const DEFAULT_ACTIVE_PATH = "/run/holdfast/policy/active.wasm";

const USAGE = `usage: main.ts policy check FILE [--budget-ms N] [--max-pages N] [--vectors DIR]
       main.ts policy swap FILE [--active PATH] [--budget-ms N] [--max-pages N] [--vectors DIR]
  check: validate FILE; print a JSON report; exit 0 accepted, 1 rejected.
  swap:  validate FILE, then atomically replace PATH (default ${DEFAULT_ACTIVE_PATH}).`;

/** The `policy` command for lib/args.ts: its name, usage and options. */
export const POLICY_COMMAND = {
  command: "policy",
  usage: USAGE,
  positionals: true,
  options: {
    "budget-ms": { type: "string" },
    "max-pages": { type: "string" },
    vectors: { type: "string" },
    active: { type: "string" },
  },
} as const;

interface Parsed {
  command: "check" | "swap";
  file: string;
  active: string;
  limits: PolicyLimits;
  vectors: URL;
}

function read({ values, positionals }: CommandLine): Parsed {
  const [command, file, ...extra] = positionals;
  if (command !== "check" && command !== "swap") {
    throw new UsageError(
      command === undefined
        ? "Missing subcommand check or swap"
        : `Unknown subcommand "${command}"`,
    );
  }
  if (file === undefined) throw new UsageError("Missing FILE");
  if (extra.length > 0) throw new UsageError(`Unexpected argument "${extra[0]}"`);
  if (command === "check" && values.active !== undefined) {
    throw new UsageError('Option "--active" applies to swap only');
  }
  const vectorsDir = stringOption(values, "vectors");
  return {
    command,
    file,
    active: stringOption(values, "active", { default: DEFAULT_ACTIVE_PATH }),
    limits: readLimits(values),
    vectors: vectorsDir === undefined ? VECTORS_DIR : dirUrl(vectorsDir),
  };
}

/** The validation limits named by `--budget-ms` and `--max-pages` (shared with `policy:swap`). */
export function readLimits(values: CommandLine["values"]): PolicyLimits {
  return {
    ...DEFAULT_LIMITS,
    buildBudgetMs: numberOption(values, "budget-ms", {
      default: DEFAULT_LIMITS.buildBudgetMs,
      min: 0.001,
    }),
    maxMemoryPages: intOption(values, "max-pages", {
      default: DEFAULT_LIMITS.maxMemoryPages,
      min: 1,
    }),
  };
}

/** A directory given on the command line, as a URL relative to the working directory. */
export function dirUrl(dir: string): URL {
  return new URL(dir.endsWith("/") ? dir : `${dir}/`, `file://${Deno.cwd()}/`);
}

/** Entry point for `main.ts policy ...`; returns the exit code (0 ok, 1 rejected, 2 usage). */
export async function main(args: string[]): Promise<number> {
  const parsed = readCommandLine(args, POLICY_COMMAND, read);
  if ("exit" in parsed) return parsed.exit;
  const p = parsed.options;
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
