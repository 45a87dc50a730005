/**
 * Holdfast's release version, the one home of the number: `main.ts --version`, the image tag
 * (`scripts/image.ts`) and `holdfast_build_info` on every `/metrics` read it. The commit is not
 * found by running git: `./hf build` and the image build write {@link BUILD_INFO_FILE} next to
 * `main.ts`; without it (a checkout never built) the commit is `unknown`.
 *
 * Bump {@link VERSION} with a CHANGELOG.md entry; every cross-process format has its own version
 * constant beside its encoder (docs/contracts.md "Format versions").
 *
 * @module
 */

/**
 * The release version (semantic: 0.MINOR.PATCH while formats may still change in a minor; `-dev`
 * while the next release is being built, CHANGELOG.md "Unreleased"). The previous release, which
 * the upgrade tests run beside this one, is named in `scripts/previous-release.txt`.
 */
export const VERSION = "0.2.0-dev";

/** The file `./hf build` and the image build write: `{"commit":"<git sha>"}`. */
export const BUILD_INFO_FILE = new URL("../build_info.json", import.meta.url);

/** What this build is: version and commit (`unknown` when no build wrote one). */
export interface BuildInfo {
  readonly version: string;
  readonly commit: string;
}

let cached: BuildInfo | undefined;

/** This process's build info; reads {@link BUILD_INFO_FILE} once (missing or unreadable: `unknown`). */
export function buildInfo(): BuildInfo {
  if (cached) return cached;
  let commit = "unknown";
  try {
    const doc = JSON.parse(Deno.readTextFileSync(BUILD_INFO_FILE));
    if (typeof doc?.commit === "string" && /^[0-9a-f]{7,40}$/.test(doc.commit)) commit = doc.commit;
  } catch {
    // Never built, or no read permission: the version alone.
  }
  cached = { version: VERSION, commit };
  return cached;
}

/** `holdfast 0.1.0 (git 1a2b3c4d5e6f)`: what `main.ts --version` prints. */
export function versionLine(info: BuildInfo = buildInfo()): string {
  return `holdfast ${info.version} (git ${info.commit.slice(0, 12)})`;
}

/** The build-info file's content for `commit` (what the builds write). */
export function buildInfoJson(commit: string): string {
  return JSON.stringify({ commit }) + "\n";
}
