/**
 * The model's settings from the cluster: `encapPort` of the LoadBalancerConfig `default`, and
 * `lbNodes`, the names of the Nodes its `lbNodeSelector` selects.
 *
 * Choices (see `controller/model/settings.ts` for how agents read them): no config, no selector,
 * or a selector the API server would reject → no `lbNodes` (every node serves); a selector that
 * matches none of the Nodes → no `lbNodes` either, with a problem to report (a selector that
 * empties every node is far more likely a mistake than the operator's wish to stop all traffic). An invalid
 * `encapPort` is left out (agents keep theirs); `readConfig` reports it.
 *
 * @module
 */

import {
  compileLabelSelector,
  formatLabelSelector,
  type LabelSelector,
} from "../../lib/label_selector.ts";
import type { ModelSettings } from "../model/settings.ts";
import type { KubeObject } from "./objects.ts";

/** The settings to publish, and why a selector was not applied (undefined: it was, or none). */
export interface DerivedSettings {
  readonly settings: ModelSettings;
  readonly problem?: string;
}

/** The settings `config` (the LoadBalancerConfig `default`, if any) and `nodes` give. */
export function deriveSettings(
  config: KubeObject | undefined,
  nodes: readonly KubeObject[],
): DerivedSettings {
  const spec = config?.spec ?? {};
  const p = spec.encapPort;
  const settings: { encapPort?: number; lbNodes?: string[] } = {};
  if (Number.isInteger(p) && p >= 1 && p <= 65535) settings.encapPort = p;
  const selector: LabelSelector | undefined = spec.lbNodeSelector ?? undefined;
  if (selector === undefined) return { settings };
  let match;
  try {
    match = compileLabelSelector(selector);
  } catch (err) {
    return { settings, problem: `spec.lbNodeSelector: ${(err as Error).message}` };
  }
  const names = nodes.filter((n) => match(n.metadata?.labels))
    .map((n) => n.metadata?.name ?? "").filter((n) => n !== "").sort();
  if (names.length === 0) {
    // No Node at all (none seen yet, or not allowed to list them): nothing to report.
    if (nodes.length === 0) return { settings };
    return {
      settings,
      problem: `spec.lbNodeSelector "${
        formatLabelSelector(selector)
      }" selects none of the ${nodes.length} nodes; every node serves until it selects one`,
    };
  }
  settings.lbNodes = names;
  return { settings };
}
