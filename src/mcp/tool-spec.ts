import type { z } from 'zod';

export interface ToolAnnotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
}

/** The annotations of a tool that only reads. */
export const READ_ONLY: ToolAnnotations = { readOnlyHint: true, destructiveHint: false, idempotentHint: true };

/** One MCP tool as data: its zod input and output schemas and what it runs against a context C. */
export interface ToolSpec<C> {
  name: string;
  description: string;
  input: z.ZodObject;
  output: z.ZodObject;
  /** MCP's hints for clients: reads only, may destroy, same call twice = once. */
  annotations: ToolAnnotations;
  run(context: C, input: never): Promise<Record<string, unknown>> | Record<string, unknown>;
  /**
   * A tool whose answer is one text (a file's content): that text alone is the result, with no
   * structuredContent and no outputSchema — so a 4 MiB file is carried once, not twice.
   */
  text?: (output: never) => string;
}

/** Typed construction of a ToolSpec: `run` sees the parsed input and must return the output schema's shape. */
export function tool<I extends z.ZodObject, O extends z.ZodObject, C>(spec: {
  name: string;
  description: string;
  input: I;
  output: O;
  annotations: ToolAnnotations;
  run(context: C, input: z.output<I>): Promise<z.output<O>> | z.output<O>;
  text?: (output: z.output<O>) => string;
}): ToolSpec<C> {
  return spec as unknown as ToolSpec<C>;
}
