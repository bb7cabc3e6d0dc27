import { BerthError } from '../../base/errors.js';
import { KUBE_GATEWAY_PORT } from '../../config/kubernetes.js';
import { clusterError, type KubeApis } from './calls.js';
import { BERTH_POD_LABELS, renderNetworkPolicy } from './network-policy.js';
import { ensurePolicy } from './run-objects.js';

/**
 * Where tenant pods reach berth's relay, and the NetworkPolicy that lets them (and nothing else):
 * kubernetes.gateway.address resolved once to an IPv4 address (pods get no DNS: a Service name
 * becomes its cluster IP), and per installation its policy made or set right before its first pod.
 */
export function gatewayOf(apis: KubeApis) {
  let resolved: Promise<string> | undefined;
  const policies = new Map<string, Promise<void>>();
  const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

  const resolve = (address: string) =>
    (resolved ??= (async () => {
      const colon = address.lastIndexOf(':');
      const host = address.slice(0, colon);
      if (IPV4.test(host)) return address;
      let ip: string | undefined;
      try {
        ip = (await apis.core.readNamespacedService({ name: host, namespace: apis.ns })).spec?.clusterIP;
      } catch (err) {
        throw clusterError(`Service ${host}`, err);
      }
      if (!ip || !IPV4.test(ip))
        throw new BerthError('RUN_FAILED', `Service ${host} has no IPv4 cluster IP (${ip ?? 'none'})`, {
          hint: "kubernetes.gateway.address names berth's gateway Service (deploy/) or an IP:port",
        });
      return `${ip}:${address.slice(colon + 1)}`;
    })().catch((err: unknown) => {
      resolved = undefined;
      throw err;
    }));

  /** The installation's NetworkPolicy for pods reaching the relay at `address` (resolved), made once: no pod of berth's runs without it. */
  const policy = (installation: string, address: string | undefined) => {
    let made = policies.get(installation);
    if (!made) {
      const colon = address?.lastIndexOf(':') ?? -1;
      const body = renderNetworkPolicy({
        namespace: apis.ns,
        installation,
        gatewayPort: address ? Number(address.slice(colon + 1)) : KUBE_GATEWAY_PORT,
        ...(address ? { gatewayIp: address.slice(0, colon) } : {}),
        berthPodLabels: BERTH_POD_LABELS,
      });
      made = ensurePolicy(apis, body);
      made.catch(() => policies.delete(installation));
      policies.set(installation, made);
    }
    return made;
  };

  return { resolve, policy };
}
