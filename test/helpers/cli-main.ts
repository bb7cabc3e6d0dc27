import { main } from '../../src/cli/berth.js';

/** What one CLI command printed and returned. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * The CLI in this process, as bin/berth.js calls it (`main(argv, env, io)`), with nothing of the
 * test's environment unless given: no dist/, no child process. A test that needs a separate
 * process (one that is killed, or races another) uses helpers.ts `cli()` in the integration tier.
 */
export async function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await main(args, env, { out: (s) => void (stdout += s), err: (s) => void (stderr += s) });
  return { code, stdout, stderr };
}
