/**
 * The previous release, built beside this checkout, for upgrade tests (issue 26): the commit named
 * in `scripts/previous-release.txt` is exported from this clone's history (`git archive`) into
 * `$TMPDIR/holdfast-previous-release/<version>-<commit>/` (tests may write only there), given
 * a copy of this checkout's npm dependencies (the release pins the same Deno and lock file) and
 * built by its own `deno task build` (BPF objects, policy module, build info). Built once per
 * machine; a later call reuses it.
 *
 * The copy is its own: a symlink to this checkout's `node_modules` made Deno set the folder up
 * again for each config that used it, and the previous release's agents, started together, raced
 * to create `node_modules/.deno/node_modules` ("File exists", CI on a fresh machine). The build
 * also resolves every import once (`deno cache`), so no agent sets anything up at start.
 *
 * Its `main.ts` runs under its own `deno.json` (its permission sets), so an LB agent of the
 * previous release runs exactly as that release would.
 *
 * @module
 */

import { run } from "./command.ts";

const REPO = new URL("../", import.meta.url).pathname;
const PINNED = `${REPO}scripts/previous-release.txt`;

/** A built previous release. */
export interface PreviousRelease {
  readonly version: string;
  readonly commit: string;
  /** Its checkout. */
  readonly dir: string;
  /** Its `main.ts`. */
  readonly main: string;
  /** Its `deno.json` (pass as `--config` so its own permission sets apply). */
  readonly config: string;
}

/** The version and commit `scripts/previous-release.txt` names. */
export async function pinnedRelease(): Promise<{ version: string; commit: string }> {
  const line = (await Deno.readTextFile(PINNED)).split("\n").find((l) => /^\s*[^#\s]/.test(l));
  const m = /^\s*(\d+\.\d+\.\d+)\s+([0-9a-f]{40})\s*$/.exec(line ?? "");
  if (!m) throw new Error(`Cannot read ${PINNED}: want a line "VERSION COMMIT" (40 hex digits)`);
  return { version: m[1]!, commit: m[2]! };
}

/** Exports and builds the pinned previous release (once); returns where it is. */
export async function previousRelease(): Promise<PreviousRelease> {
  const { version, commit } = await pinnedRelease();
  const tmp = Deno.env.get("TMPDIR") ?? "/tmp";
  const dir = `${tmp}/holdfast-previous-release/${version}-${commit.slice(0, 12)}`;
  const release = { version, commit, dir, main: `${dir}/main.ts`, config: `${dir}/deno.json` };
  const marker = `${LAYOUT} ${version} ${commit}\n`;
  if (await readOr(`${dir}/.built`) === marker) return release;
  const has = await run(["git", "-C", REPO, "cat-file", "-e", `${commit}^{commit}`], {
    check: false,
  });
  if (has.code !== 0) {
    throw new Error(
      `Cannot build the previous release ${version}: commit ${commit} is not in this clone's ` +
        `history (a shallow clone? run "git fetch --unshallow")`,
    );
  }
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(dir, { recursive: true });
  const archive = `${dir}.tar`;
  try {
    await run(["git", "-C", REPO, "archive", "--format=tar", "-o", archive, commit]);
    await run(["tar", "-xf", archive, "-C", dir]);
  } finally {
    await Deno.remove(archive).catch(() => {});
  }
  // The same Deno and lock file: a copy of this checkout's npm dependencies serves it (the
  // packages are in Deno's cache already), set up once here before any agent starts.
  const build = 'cd "$1" && cp -a "$3" node_modules && "$2" cache -q --config deno.json main.ts' +
    ' && exec "$2" task -q build';
  await run(["sh", "-c", build, "sh", dir, Deno.execPath(), `${REPO}node_modules`], {
    timeoutMs: 600_000,
  });
  // Its build info names its own commit (the build read this checkout's git).
  await Deno.writeTextFile(`${dir}/build_info.json`, JSON.stringify({ commit }) + "\n");
  await Deno.writeTextFile(`${dir}/.built`, marker);
  return release;
}

/** How a built release is laid out; a build made another way is built again. */
const LAYOUT = "layout-2";

async function readOr(path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch {
    return "";
  }
}
