package servicebus

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// entraScope is the Microsoft Entra ID scope of Service Bus data-plane
// tokens (docs/wire-servicebus.md §3.3).
const entraScope = "https://servicebus.azure.net/.default"

// refreshBefore is how long before expiry a cached token is replaced.
const refreshBefore = 5 * time.Minute

// credentialFor returns cred (a test's), nothing for a connection string,
// or the Microsoft Entra ID credential the configuration names.
func (c *connSettings) credentialFor(cred azcore.TokenCredential) (azcore.TokenCredential, error) {
	if cred != nil || c.cs != nil {
		return cred, nil
	}
	return newCredential(c.cred)
}

// newCredential builds the Microsoft Entra ID credential of a credential
// block (already validated).
func newCredential(c CredentialConfig) (azcore.TokenCredential, error) {
	var cred azcore.TokenCredential
	var err error
	switch c.Kind {
	case credentialDefault, "":
		cred, err = azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{TenantID: c.TenantID})
	case credentialWorkload:
		cred, err = azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientID: c.ClientID, TenantID: c.TenantID, TokenFilePath: c.TokenFile})
	case credentialManaged:
		opt := &azidentity.ManagedIdentityCredentialOptions{}
		switch {
		case c.ClientID != "":
			opt.ID = azidentity.ClientID(c.ClientID)
		case c.ResourceID != "":
			opt.ID = azidentity.ResourceID(c.ResourceID)
		}
		cred, err = azidentity.NewManagedIdentityCredential(opt)
	case credentialEnvironment:
		cred, err = azidentity.NewEnvironmentCredential(nil)
	case credentialCLI:
		cred, err = azidentity.NewAzureCLICredential(&azidentity.AzureCLICredentialOptions{TenantID: c.TenantID})
	default:
		err = fmt.Errorf("unknown kind %q", c.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("credential %q: %w", c.Kind, err)
	}
	return cred, nil
}

// authorizer yields the Authorization header of a REST request on the
// resource (https://{namespace}/{entity}).
type authorizer interface {
	authorization(ctx context.Context, resource string) (string, error)
}

// sasSignature builds a shared access signature token for uri, valid until
// expiry (docs/wire-servicebus.md §3.2): the lower-cased, URL-encoded resource
// URI and the expiry signed with HMAC-SHA256 keyed by the key's text.
func sasSignature(uri, keyName, key string, expiry time.Time) string {
	sr := strings.ToLower(url.QueryEscape(uri))
	se := strconv.FormatInt(expiry.Unix(), 10)
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(h.Sum(nil)))
	return "SharedAccessSignature sr=" + sr + "&sig=" + sig + "&se=" + se + "&skn=" + url.QueryEscape(keyName)
}

type cachedToken struct {
	value   string
	expires time.Time
}

// sasKeyAuth signs tokens with a connection string's key, one per
// resource, renewed refreshBefore their expiry.
type sasKeyAuth struct {
	keyName, key string
	ttl          time.Duration
	now          func() time.Time

	mu    sync.Mutex
	cache map[string]cachedToken
}

func (a *sasKeyAuth) authorization(_ context.Context, resource string) (string, error) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.cache[resource]; ok && now.Add(refreshBefore).Before(t.expires) {
		return t.value, nil
	}
	exp := now.Add(a.ttl).Round(time.Second)
	t := cachedToken{value: sasSignature(resource, a.keyName, a.key, exp), expires: exp}
	if a.cache == nil || len(a.cache) > 1024 {
		a.cache = map[string]cachedToken{}
	}
	a.cache[resource] = t
	return t.value, nil
}

// sasTokenAuth sends a connection string's pre-built signature as it is;
// it cannot be renewed.
type sasTokenAuth struct {
	token   string
	expires time.Time
	now     func() time.Time
}

func (a *sasTokenAuth) authorization(context.Context, string) (string, error) {
	if !a.now().Before(a.expires) {
		return "", fmt.Errorf("the connection string's SharedAccessSignature expired at %s; issue a new one", a.expires.UTC().Format(time.RFC3339))
	}
	return a.token, nil
}

// bearerAuth gets Microsoft Entra ID tokens for Service Bus.
type bearerAuth struct {
	cred azcore.TokenCredential
	now  func() time.Time

	mu  sync.Mutex
	tok cachedToken
}

func (a *bearerAuth) authorization(ctx context.Context, _ string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tok.value != "" && a.now().Add(refreshBefore).Before(a.tok.expires) {
		return a.tok.value, nil
	}
	t, err := a.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{entraScope}})
	if err != nil {
		return "", fmt.Errorf("microsoft entra id token: %w", err)
	}
	a.tok = cachedToken{value: "Bearer " + t.Token, expires: t.ExpiresOn}
	return a.tok.value, nil
}

// newAuthorizer returns the HTTPS transport's authorizer.
func newAuthorizer(c *connSettings, cred azcore.TokenCredential) authorizer {
	switch {
	case c.cs != nil && c.cs.sas != "":
		return &sasTokenAuth{token: c.cs.sas, expires: c.cs.sasExpiry, now: time.Now}
	case c.cs != nil:
		return &sasKeyAuth{keyName: c.cs.keyName, key: c.cs.key, ttl: c.tokenTTL, now: time.Now}
	}
	return &bearerAuth{cred: cred, now: time.Now}
}
