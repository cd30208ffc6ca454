// A probed client in Node, with no generated code: @grpc/proto-loader reads
// probe.proto at run time, protobufjs decodes the error details.
//
//   node example.js [ADDR]        (default 127.0.0.1:50051, make run's)
//
// It creates a target whose readiness probe connects to a TCP server this
// script starts, watches the probe's transition to success, then sends a
// spec with three mistakes and prints the field violations probed returns
// (a google.rpc.BadRequest in the grpc-status-details-bin trailer), and
// deletes the target.
'use strict';

const net = require('node:net');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const root = path.resolve(__dirname, '..', '..', '..');
const includeDirs = [path.join(root, 'proto'), path.join(root, 'third_party', 'googleapis')];
const addr = process.argv[2] || '127.0.0.1:50051';
const name = 'from-node';

// probe.proto as grpc-js services; field names in lowerCamelCase, the
// API's JSON names, which are also the paths of field violations.
const def = protoLoader.loadSync('probe/v1/probe.proto', {
  includeDirs, keepCase: false, longs: String, enums: String, defaults: true, oneofs: true,
});
const { ProbeService } = grpc.loadPackageDefinition(def).probe.v1;

// google.rpc.Status and its details, to read a rich error.
const rpc = new protobuf.Root();
rpc.resolvePath = (_origin, target) => {
  for (const dir of includeDirs) {
    const p = path.join(dir, target);
    try { require('node:fs').accessSync(p); return p; } catch { /* next */ }
  }
  return target; // google/protobuf/*.proto: bundled with protobufjs
};
rpc.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto']);
const Status = rpc.lookupType('google.rpc.Status');
const BadRequest = rpc.lookupType('google.rpc.BadRequest');

// fieldViolations returns the field violations of a gRPC error.
function fieldViolations(err) {
  const [bin] = err.metadata ? err.metadata.get('grpc-status-details-bin') : [];
  if (!bin) return [];
  const out = [];
  for (const any of Status.decode(bin).details) {
    if (any.type_url === 'type.googleapis.com/google.rpc.BadRequest') {
      out.push(...BadRequest.decode(any.value).fieldViolations);
    }
  }
  return out;
}

const call = (client, method, req) => new Promise((resolve, reject) => {
  client[method](req, { deadline: Date.now() + 10000 }, (err, res) => (err ? reject(err) : resolve(res)));
});

async function main() {
  const client = new ProbeService(addr, grpc.credentials.createInsecure());
  const server = net.createServer((c) => c.end());
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = server.address().port;
  try {
    await call(client, 'deleteTarget', { name, gracePeriodSeconds: 0 }).catch(() => {}); // a previous run's

    // 1. A target probed every 100 ms: periodSeconds 1 + periodMilliseconds -900.
    const { target } = await call(client, 'createTarget', {
      target: {
        name,
        labels: { lang: 'node' },
        readinessProbe: { tcpSocket: { host: '127.0.0.1', port }, periodSeconds: 1, periodMilliseconds: -900 },
      },
    });
    console.log(`created target ${target.name} (revision ${target.status.revision})`);

    // 2. Its readiness transition, replayed from the creation's revision.
    const stream = client.watch({ sinceRevision: target.status.revision, names: [name], kinds: ['EVENT_KIND_TRANSITION'] });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no transition within 10s')), 10000);
      stream.on('data', (res) => {
        for (const ev of res.events) {
          if (ev.probeType === 'PROBE_TYPE_READINESS' && ev.to === 'RESULT_SUCCESS') {
            const r = (x) => x.replace('RESULT_', '').toLowerCase();
            console.log(`${ev.name}: readiness ${r(ev.from)}→${r(ev.to)}, ready=${ev.ready}`);
            clearTimeout(timer);
            resolve();
          }
        }
      });
      stream.on('error', (err) => { if (err.code !== grpc.status.CANCELLED) reject(err); });
    });
    stream.cancel();

    // 3. A spec with three mistakes: every one is reported, by field.
    try {
      await call(client, 'createTarget', {
        target: { name: 'bad', readinessProbe: { tcpSocket: { host: '127.0.0.1', port: 0 }, periodSeconds: 1, periodMilliseconds: -950, timeoutMilliseconds: 1000 } },
      });
      throw new Error('the bad spec was accepted');
    } catch (err) {
      if (err.code !== grpc.status.INVALID_ARGUMENT) throw err;
      console.log('bad spec rejected: INVALID_ARGUMENT');
      for (const v of fieldViolations(err)) console.log(`  ${v.field}: ${v.description}`);
    }

    await call(client, 'deleteTarget', { name, gracePeriodSeconds: 0 });
    console.log(`deleted target ${name}`);
  } finally {
    server.close();
    client.close();
  }
}

main().catch((err) => {
  console.error(`error: ${err.message}`);
  process.exit(1);
});
