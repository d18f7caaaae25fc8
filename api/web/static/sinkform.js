// The new-sink form, enhanced (served as a file: the CSP allows no inline
// script). Without JavaScript every field shows, each saying which kind it
// is for, and Send test posts the form and answers with the page. With it:
// only the chosen kind's fields and connections show, the new connection's
// fields only when "New connection…" is chosen, and Send test answers in
// place, so nothing typed (the token included) has to be typed again.
const form = document.getElementById("create-sink");
if (form) {
  const kind = form.querySelector("#sink-kind");
  const conn = form.querySelector("#sink-connection");
  const fresh = form.querySelector("#new-connection");
  const sync = () => {
    for (const el of form.querySelectorAll("[data-kind]")) {
      if (el.tagName === "OPTION") {
        el.hidden = el.disabled = el.dataset.kind !== kind.value;
      } else {
        el.hidden = el.dataset.kind !== kind.value;
      }
    }
    if (conn.selectedOptions.length && conn.selectedOptions[0].disabled) conn.value = "";
    if (fresh) fresh.hidden = conn.value !== "new";
  };
  kind.addEventListener("change", sync);
  conn.addEventListener("change", sync);
  sync();

  const test = form.querySelector("#test-sink-button");
  const out = document.getElementById("test-result");
  if (test && out && window.fetch) {
    test.addEventListener("click", async (event) => {
      event.preventDefault();
      out.className = "";
      out.textContent = "Sending a test message…";
      try {
        const res = await fetch(test.formAction, {
          method: "POST",
          headers: { "Accept": "application/json" },
          body: new URLSearchParams(new FormData(form)),
        });
        const answer = await res.json();
        out.className = answer.ok ? "notice" : "error";
        out.textContent = answer.text;
      } catch {
        out.className = "error";
        out.textContent = "The test could not be sent. Try again.";
      }
    });
  }
}
