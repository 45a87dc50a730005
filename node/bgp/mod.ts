/**
 * The bird2 driver both announce modes use: typed settings (`settings.ts`), the generated
 * bird.conf (`bird_config.ts`) and the daemon the node owns (`bird.ts`). Addresses are gated by
 * `lo`: whatever /32 inside the settings' prefixes is on `lo` is announced (docs/anycast.md).
 *
 * @module
 */
export * from "./settings.ts";
export * from "./bird_config.ts";
export * from "./bird.ts";
export * from "./supervisor.ts";
export * from "./lb_announcer.ts";
