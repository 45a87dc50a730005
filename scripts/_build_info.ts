/**
 * The git commit of this checkout, for `build_info.json` (lib/version.ts): written by `./hf build`
 * and by the image build. Scripts only: product code never runs git.
 *
 * @module
 */
import { BUILD_INFO_FILE, buildInfoJson } from "../lib/version.ts";

/** The checkout's commit (`git rev-parse HEAD`), or null when git cannot tell. */
export async function gitCommit(): Promise<string | null> {
  try {
    const out = await new Deno.Command("git", {
      args: ["rev-parse", "HEAD"],
      cwd: new URL("..", import.meta.url),
      stdout: "piped",
      stderr: "null",
    }).output();
    const sha = new TextDecoder().decode(out.stdout).trim();
    return out.success && /^[0-9a-f]{40}$/.test(sha) ? sha : null;
  } catch {
    return null;
  }
}

/** Writes `build_info.json` with the commit into `target` (default: next to main.ts). */
export async function writeBuildInfo(target: URL | string = BUILD_INFO_FILE): Promise<string> {
  const commit = (await gitCommit()) ?? "unknown";
  await Deno.writeTextFile(target, buildInfoJson(commit));
  return commit;
}
