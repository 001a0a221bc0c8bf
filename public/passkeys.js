// Passkeys: the one place Tether calls WebAuthn. Loaded only where passkeys are offered (sign-in and
// /settings/security, when PASSKEYS_ENABLED=true). Without JavaScript these buttons are hidden and
// the password form works as always. better-auth's passkey endpoints do the server side.
(() => {
  "use strict";

  const AUTH = "/api/auth/passkey";

  const statusFor = (button) => button.closest("[data-passkey-register-form], .passkey-sign-in")?.querySelector("[data-passkey-status]");
  const say = (button, text) => {
    const status = statusFor(button);
    if (status) status.textContent = text;
  };

  async function call(path, body) {
    const response = await fetch(
      AUTH + path,
      body === undefined
        ? { credentials: "same-origin" }
        : { method: "POST", credentials: "same-origin", headers: { "content-type": "application/json" }, body: JSON.stringify(body) },
    );
    let json = null;
    try {
      json = await response.json();
    } catch {
      // No JSON body: the status says enough.
    }
    if (!response.ok) throw new Error((json && json.message) || `The server answered ${response.status}.`);
    return json;
  }

  // A cancelled or timed-out browser prompt is the user's choice, not a failure worth a red message.
  const cancelled = (error) => error && (error.name === "NotAllowedError" || error.name === "AbortError");

  async function signIn(button) {
    const options = await call("/generate-authenticate-options");
    const credential = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
    await call("/verify-authentication", { response: credential.toJSON() });
    // Back to the page that asked for the sign-in (checked by the server; a path on this site only).
    const next = button.getAttribute("data-next") || "";
    window.location.assign(/^\/(?![\/\\])[^\\\s]*$/.test(next) ? next : "/home");
  }

  async function register(button) {
    const nameField = document.getElementById("passkey-name");
    const name = nameField && nameField.value.trim() ? nameField.value.trim() : undefined;
    const options = await call("/generate-register-options");
    const credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) });
    await call("/verify-registration", { response: credential.toJSON(), ...(name ? { name } : {}) });
    window.location.assign("/settings/security?notice=passkey-added");
  }

  document.addEventListener("click", async (event) => {
    const target = event.target instanceof Element ? event.target : null;
    const button = target && target.closest("[data-passkey-sign-in], [data-passkey-register]");
    if (!button || button.disabled) return;
    if (!window.PublicKeyCredential || !PublicKeyCredential.parseRequestOptionsFromJSON) {
      say(button, "This browser does not support passkeys. Use your password instead.");
      return;
    }
    button.disabled = true;
    say(button, "Follow your browser's prompt…");
    try {
      await (button.hasAttribute("data-passkey-sign-in") ? signIn(button) : register(button));
    } catch (error) {
      say(button, cancelled(error) ? "Cancelled." : `That did not work: ${error.message}`);
      button.disabled = false;
    }
  });
})();
