/**
 * RFC 8628 device authorization as Tether uses it (see src/plugins/host/device-grant.ts): the one
 * client id the server accepts, and the grant type the device polls with. Shared by the server and
 * the device executable, so neither can drift.
 */
export const DEVICE_CLIENT_ID = "tether-host";
export const DEVICE_CODE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code";
