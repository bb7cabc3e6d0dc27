import { lookup } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { BerthConfig } from '../config/berth-config.js';
import { hostAllowed } from '../config/outbound.js';
import type { PostOut } from '../channels/contract.js';
import { isPrivateAddress } from '../outbound/addresses.js';

/**
 * POSTs berth makes to a URL the operator configured (a webhook's callback), on the egress
 * proxy's address rules: a name that resolves to a private or loopback address is refused unless
 * berth.yaml egress.private_hosts names it. The check is in the connection's own lookup, so the
 * address checked is the address connected to.
 */
export function createPostOut(config: () => BerthConfig, timeoutMs = 15_000): PostOut {
  return (url, body, headers) =>
    new Promise((resolve, reject) => {
      const target = new URL(url);
      const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
      const host = target.hostname.replace(/^\[|\]$/g, '');
      const privateOk = hostAllowed(config().egress.private_hosts, host, port);
      // An address in the URL is connected to without a lookup: checked here.
      if (isIP(host) && !privateOk && isPrivateAddress(host))
        return reject(new Error(`${host} is a private or loopback address (berth.yaml egress.private_hosts may allow it)`));
      const guarded: LookupFunction = (name, options, done) =>
        lookup(name, { ...options, all: true }, (err, addresses) => {
          if (err) return done(err, '', 4);
          const list = addresses as Array<{ address: string; family: number }>;
          const refused = list.length === 0 || (!privateOk && list.some((a) => isPrivateAddress(a.address)));
          if (refused)
            return done(
              Object.assign(new Error(`${host} resolves to a private or loopback address (berth.yaml egress.private_hosts may allow it)`), {
                code: 'EPRIVATE',
              }),
              '',
              4,
            );
          if (options.all) return done(null, list);
          const first = list[0]!;
          done(null, first.address, first.family);
        });
      const req = (target.protocol === 'https:' ? https : http).request(
        target,
        { method: 'POST', headers: { ...headers, 'content-length': Buffer.byteLength(body) }, lookup: guarded, timeout: timeoutMs },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
          res.on('error', reject);
          res.on('aborted', () => reject(new Error('the answer was cut off')));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer in ${timeoutMs / 1000} s`)));
      req.on('error', reject);
      req.end(body);
    });
}
