import fs from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { consumerLock, startBridges } from '../../src/bridges/start.js';
import { homePaths } from '../../src/config/home.js';
import { tryOwnerLock } from '../../src/fs/lock.js';
import { unitHome } from '../helpers.js';

/** Starting the configured bridges is all or nothing; following berth.yaml never throws. */

// Nothing here may leave the machine: both services are a closed port on loopback.
const config = (telegram: string) =>
  [
    'bridges:',
    '  signal:',
    '    url: http://127.0.0.1:9',
    "    account: '+15550000000'",
    '  telegram:',
    '    api_url: http://127.0.0.1:9',
    `    ${telegram}`,
    '',
  ].join('\n');

describe('startBridges', () => {
  it('a channel that cannot be built fails the start with nothing running and no lock held', async () => {
    await using h = unitHome({ config: config('token_file: /nonexistent/berth/telegram.token') });
    const stateDir = homePaths(h.home).stateDir;
    expect(() => startBridges({ admin: h.berth.admin, config: () => h.berth.config, logger: pino({ level: 'silent' }), stateDir })).toThrow(
      /token_file .* cannot be read/,
    );
    for (const name of ['signal', 'telegram']) {
      const lock = tryOwnerLock(consumerLock(stateDir, name));
      expect('release' in lock, name).toBe(true);
      if ('release' in lock) lock.release();
    }
  });

  it('berth.yaml it cannot follow leaves the running bridge, says so once, and tries again when berth.yaml changes', async () => {
    await using h = unitHome({ config: config("token: '1:first'") });
    const bridges = startBridges({
      admin: h.berth.admin,
      config: () => h.berth.config,
      logger: pino({ level: 'silent' }),
      stateDir: homePaths(h.home).stateDir,
      backoffMs: { min: 50, max: 100 },
    });
    try {
      fs.writeFileSync(join(h.home, 'berth.yaml'), config('token_file: /nonexistent/berth/telegram.token'));
      expect(bridges.reconfigure()).toMatch(/^telegram bridge not restarted: token_file .* cannot be read; the running one goes on$/);
      expect(bridges.channel('telegram')).toBeDefined();
      expect(bridges.reconfigure()).toBeUndefined(); // the same berth.yaml: not tried (nor said) again
      fs.writeFileSync(join(h.home, 'berth.yaml'), config("token: '1:second'"));
      expect(bridges.reconfigure()).toMatch(
        /^telegram bridge restarted: poll at http:\/\/127\.0\.0\.1:9 with token #[0-9a-f]{8} \(was .*\)$/,
      );
    } finally {
      await bridges.stop();
    }
  });
});
