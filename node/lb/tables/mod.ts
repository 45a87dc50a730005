/**
 * The load-balancer model: services, frontends, backends and local-redirect overrides in
 * statedb tables, written only through the {@linkcode Writer}.
 *
 * @module
 */
export * from "./address.ts";
export * from "./backend.ts";
export * from "./frontend.ts";
export * from "./print.ts";
export * from "./redirect.ts";
export * from "./select.ts";
export * from "./service.ts";
export * from "./source_writer.ts";
export * from "./tables.ts";
export * from "./writer.ts";
