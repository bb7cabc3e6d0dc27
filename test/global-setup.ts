import fs from 'node:fs';
import Docker from 'dockerode';

/**
 * Integration tests need a real engine and berth's shell and agent images. Missing any is a loud
 * failure, never a skip: "make test" sets them up, so a miss here means setup is broken.
 */
export default async function setup(): Promise<void> {
  const docker = new Docker();
  try {
    await docker.ping();
  } catch (err) {
    throw new Error(`No Docker engine answers (${(err as Error).message}). Run "make test", which starts one.`);
  }
  try {
    await docker.getImage('berth/shell:latest').inspect();
  } catch {
    throw new Error('Image berth/shell:latest is missing. Run "make test" (or "npx berth images build").');
  }
  try {
    await docker.getImage('berth/agent:latest').inspect();
  } catch {
    throw new Error('Image berth/agent:latest is missing. Run "make test" (or "node bin/berth.js images build agent").');
  }
  for (const [tool, what] of [
    ['/usr/bin/chromium', "Debian's chromium"],
    ['/usr/bin/docker-compose', "Debian's docker-compose"],
  ]) {
    if (!fs.existsSync(tool as string)) throw new Error(`${what} is missing (${tool}). Run "make test", which installs it.`);
  }
}
