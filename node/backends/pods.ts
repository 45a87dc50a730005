/**
 * Where the node agent learns which pods run on its node: a {@linkcode PodSource}. Two exist —
 * the Kubernetes API (`kube_pods.ts`) and a file (here, for the lab and the demo):
 *
 * ```yaml
 * pods:
 *   - { name: default/web-1, ips: [10.2.0.5, "2001:db8:2::5"] }
 * ```
 *
 * A pod entry that is malformed is logged with its name and skipped; the rest applies. A file
 * that is not a list of pods at all keeps the last good one.
 *
 * @module
 */

import { parse as parseYaml } from "yaml";
import { watchFile } from "../anycast/watch_file.ts";
import type { Logger } from "../../lib/log.ts";
import { canonicalIp, type LocalPod } from "./plan.ts";

/** Follows the pods of this node; `start` resolves once the first list went to `onPods`. */
export interface PodSource {
  start(onPods: (pods: readonly LocalPod[]) => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

/** Thrown when a pods file is not a list of pods. */
export class PodsFileError extends Error {
  override name = "PodsFileError";
}

/** Parses a pods file; bad entries are reported through `onBad` and left out. */
export function parsePodsFile(
  text: string,
  onBad: (index: number, name: unknown, why: string) => void = () => {},
): LocalPod[] {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (e) {
    throw new PodsFileError(`Invalid pods file: ${(e as Error).message}`);
  }
  const list = (raw as { pods?: unknown } | null)?.pods ?? [];
  if (!Array.isArray(list)) throw new PodsFileError("Invalid pods file: `pods` is not a list");
  const out: LocalPod[] = [];
  list.forEach((p: { name?: unknown; ips?: unknown }, i) => {
    if (typeof p?.name !== "string" || p.name === "") {
      return onBad(i, p?.name, "name is not a non-empty string");
    }
    if (!Array.isArray(p.ips)) return onBad(i, p.name, "ips is not a list");
    const ips = p.ips.map((a) => typeof a === "string" ? canonicalIp(a) : "");
    const bad = p.ips.find((_, k) => ips[k] === "");
    if (bad !== undefined) return onBad(i, p.name, `${JSON.stringify(bad)} is not an IP address`);
    out.push({ name: p.name.includes("/") ? p.name : `default/${p.name}`, ips });
  });
  return out;
}

/** The pods listed in `path`, re-read when it changes (inotify, and a poll as a safety net). */
export function filePodSource(path: string, log: Logger): PodSource {
  const ac = new AbortController();
  return {
    start: (onPods) =>
      watchFile(path, async (text) => {
        let pods: LocalPod[];
        try {
          pods = parsePodsFile(text, (index, name, why) =>
            log.error("pod entry refused", { file: path, index, pod: name, why }));
        } catch (e) {
          log.error("pods file refused, keeping the last good one", { file: path, err: e });
          return;
        }
        await onPods(pods);
      }, {
        signal: ac.signal,
        onError: (err) =>
          log.warn("cannot read the pods file", { file: path, err }),
      }),
    stop: () => {
      ac.abort();
      return Promise.resolve();
    },
  };
}
