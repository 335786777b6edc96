// The OpenID provider of the manager's single sign-on test: the `oidc-provider` package
// (a certified implementation) with its development login pages (any name, any
// password), and in front of it a small proxy that the test can ask to misbehave, so
// that the manager's refusals are tried against a real provider's tokens.
//
// The provider's issuer is the proxy's address: everything (discovery, keys, the
// browser's visits, the token exchange) goes through the proxy. Modes, set with
// `POST /__test/mode/NAME`:
//   pass    forwards everything untouched
//   tamper  changes the subject inside the ID token of the token response (the
//           signature no longer matches)
//   nonce   replaces the nonce of the authorization request (the provider signs a
//           token carrying the wrong nonce)
//   issuer  signs the ID token again with the provider's own key, under another issuer
//   state   replaces the state of the provider's redirect back to the manager
//   deny    asks the provider for a login without interaction that it must refuse
//           (prompt=none with max_age=0: the provider answers login_required)
// It also strips the development pages' web font import (no traffic leaves the machine).
//
// Environment: OIDC_MODULES (the node_modules directory holding oidc-provider),
// OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URI, OIDC_GROUPS (JSON: login name
// -> groups). Prints one JSON line {"issuer": …} when ready; stops when stdin closes.

import { createServer, request as forward } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const modules = process.env.OIDC_MODULES;
const require = createRequire(join(modules, 'resolver.js'));
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const { default: Provider } = await load('oidc-provider');
const jose = await load('jose');

const groups = JSON.parse(process.env.OIDC_GROUPS || '{}');
let mode = 'pass';

const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
const signingJwk = { ...(await jose.exportJWK(privateKey)), kid: 'test-key', alg: 'RS256', use: 'sig' };

const proxy = createServer();
await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${proxy.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: process.env.OIDC_CLIENT_ID,
    client_secret: process.env.OIDC_CLIENT_SECRET,
    redirect_uris: [process.env.OIDC_REDIRECT_URI],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  jwks: { keys: [signingJwk] },
  cookies: { keys: ['probactr-test-provider-cookie-key'] },
  scopes: ['openid', 'profile', 'email', 'groups'],
  claims: {
    profile: ['preferred_username', 'name'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  pkce: { required: () => true },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          preferred_username: id,
          name: id,
          email: `${id}@example.test`,
          email_verified: true,
          groups: groups[id] ?? [],
        };
      },
    };
  },
});
const server = provider.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const upstream = server.address().port;

const base64url = (text) => Buffer.from(text).toString('base64url');
const decoded = (part) => JSON.parse(Buffer.from(part, 'base64url').toString());

async function rewriteTokenResponse(body) {
  const answer = JSON.parse(body);
  if (!answer.id_token) return body;
  const [header, payload, signature] = answer.id_token.split('.');
  const claims = decoded(payload);
  if (mode === 'tamper') {
    claims.sub = 'mallory';
    answer.id_token = [header, base64url(JSON.stringify(claims)), signature].join('.');
  } else if (mode === 'issuer') {
    claims.iss = `${issuer}/another-tenant`;
    answer.id_token = await new jose.SignJWT(claims)
      .setProtectedHeader(decoded(header))
      .sign(privateKey);
  }
  return JSON.stringify(answer);
}

function rewriteRequestUrl(url) {
  const parsed = new URL(url, issuer);
  if (parsed.pathname === '/auth') {
    if (mode === 'nonce') parsed.searchParams.set('nonce', 'a-nonce-of-another-login');
    if (mode === 'deny') {
      parsed.searchParams.set('prompt', 'none');
      parsed.searchParams.set('max_age', '0');
    }
  }
  return parsed.pathname + parsed.search;
}

function rewriteLocation(location) {
  if (mode !== 'state' || !location || !location.startsWith(process.env.OIDC_REDIRECT_URI)) return location;
  const parsed = new URL(location);
  parsed.searchParams.set('state', 'a-state-of-another-login');
  return parsed.toString();
}

proxy.on('request', (req, res) => {
  const control = req.url.match(/^\/__test\/mode\/([a-z]+)$/);
  if (control && req.method === 'POST') {
    mode = control[1];
    res.writeHead(204).end();
    return;
  }
  const out = forward({
    host: '127.0.0.1',
    port: upstream,
    method: req.method,
    path: rewriteRequestUrl(req.url),
    headers: req.headers,
  }, async (answer) => {
    const chunks = [];
    for await (const chunk of answer) chunks.push(chunk);
    let body = Buffer.concat(chunks).toString('utf8');
    const type = answer.headers['content-type'] || '';
    if (req.url.startsWith('/token') && type.includes('json')) body = await rewriteTokenResponse(body);
    if (type.includes('html')) body = body.replace(/@import url\(https:[^)]*\);/g, '');
    const headers = { ...answer.headers, location: rewriteLocation(answer.headers.location) };
    if (!headers.location) delete headers.location;
    delete headers['content-length'];
    delete headers['transfer-encoding'];
    res.writeHead(answer.statusCode, headers);
    res.end(body);
  });
  out.on('error', (err) => res.writeHead(502).end(String(err)));
  req.pipe(out);
});

process.stdout.write(`${JSON.stringify({ issuer })}\n`);
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
