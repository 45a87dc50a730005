/**
 * The node's BGP settings (types and validation in controller/model/bgp_settings.ts, shared
 * with the controller, which checks the LoadBalancerConfig's `spec.bgp`) and the
 * `--bgp-config` file reader.
 *
 * @module
 */

import { parse as parseYaml } from "yaml";
import {
  type BgpProblem,
  type BgpSettings,
  BgpSettingsError,
  parseBgpSettings,
} from "../../controller/model/bgp_settings.ts";

export * from "../../controller/model/bgp_settings.ts";

/** Reads settings from YAML or JSON text (see {@linkcode parseBgpSettings}). */
export function parseBgpSettingsText(
  text: string,
): { settings: BgpSettings; problems: BgpProblem[] } {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (e) {
    throw new BgpSettingsError(`Cannot parse BGP settings: ${(e as Error).message}`, { cause: e });
  }
  return parseBgpSettings(raw);
}
