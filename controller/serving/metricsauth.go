package serving

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long the API server's answers are kept, as controller-runtime's metrics filter keeps
// them: a scrape every few seconds asks the API server about once a minute.
const (
	tokenTTL   = time.Minute
	allowedTTL = 5 * time.Minute
	deniedTTL  = 30 * time.Second
	// reviewTimeout bounds each review request.
	reviewTimeout = 10 * time.Second
	// answersKept bounds each cache: a handful of scrapers ask.
	answersKept = 1024
)

// reviewBackoff retries a review the API server failed to answer, as the API server's
// own delegating authenticator does.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// MetricsAuth is controller-runtime's metrics filter (filters.WithAuthenticationAndAuthorization)
// without k8s.io/apiserver: the caller's bearer token is reviewed (TokenReview) and its
// user must be allowed the request's verb on its path (SubjectAccessReview), both
// answers kept for a while. k8s.io/apiserver brings 7.5 MB of code, gRPC and CEL with
// it, and the heap its package initialisers fill, into a controller that uses two
// requests of it.
func MetricsAuth(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authentication, err := authenticationclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	authorization, err := authorizationclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	a := &metricsAuth{
		tokens: authentication.TokenReviews(), access: authorization.SubjectAccessReviews(),
		users: cache.NewLRUExpireCache(answersKept), decisions: cache.NewLRUExpireCache(answersKept),
	}
	return a.filter, nil
}

type metricsAuth struct {
	tokens    authenticationclient.TokenReviewInterface
	access    authorizationclient.SubjectAccessReviewInterface
	users     *cache.LRUExpireCache
	decisions *cache.LRUExpireCache
}

// reviewedUser is a TokenReview's answer: the user, or not authenticated.
type reviewedUser struct {
	authenticated bool
	user          authenticationv1.UserInfo
}

func (a *metricsAuth) filter(log logr.Logger, handler http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		reviewed, err := a.user(req.Context(), token)
		if err != nil {
			log.Error(err, "metricsCallerNotAuthenticated")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if !reviewed.authenticated {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, err := a.allowed(req.Context(), reviewed.user, verb, req.URL.Path)
		if err != nil {
			log.Error(err, "metricsCallerNotAuthorized", "user", reviewed.user.Username)
			http.Error(w, "Authorization for user "+reviewed.user.Username+" failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(1).Info("metricsCallerDenied", "user", reviewed.user.Username, "verb", verb, "path", req.URL.Path)
			http.Error(w, "Authorization denied for user "+reviewed.user.Username, http.StatusForbidden)
			return
		}
		// The token is the caller's: nothing behind the filter needs it.
		req.Header.Del("Authorization")
		handler.ServeHTTP(w, req)
	}), nil
}

// bearerToken is the request's bearer token, as the API server's authenticator reads it.
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" || strings.Contains(token, " ") {
		return "", false
	}
	return token, true
}

func (a *metricsAuth) user(ctx context.Context, token string) (reviewedUser, error) {
	// The cache holds a digest of the token, never the token.
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if known, ok := a.users.Get(key); ok {
		return known.(reviewedUser), nil
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	var answer *authenticationv1.TokenReview
	err := retryReview(ctx, func(ctx context.Context) (err error) {
		answer, err = a.tokens.Create(ctx, review, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return reviewedUser{}, fmt.Errorf("reviewing the token: %w", err)
	}
	reviewed := reviewedUser{authenticated: answer.Status.Authenticated, user: answer.Status.User}
	a.users.Add(key, reviewed, tokenTTL)
	return reviewed, nil
}

func (a *metricsAuth) allowed(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (bool, error) {
	key := decisionKey(user, verb, path)
	if known, ok := a.decisions.Get(key); ok {
		return known.(bool), nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for name, values := range user.Extra {
		extra[name] = authorizationv1.ExtraValue(values)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: verb, Path: path},
	}}
	var answer *authorizationv1.SubjectAccessReview
	err := retryReview(ctx, func(ctx context.Context) (err error) {
		answer, err = a.access.Create(ctx, review, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("reviewing the access: %w", err)
	}
	if answer.Status.Allowed {
		a.decisions.Add(key, true, allowedTTL)
	} else {
		a.decisions.Add(key, false, deniedTTL)
	}
	return answer.Status.Allowed, nil
}

// decisionKey is everything an access review is asked about.
func decisionKey(user authenticationv1.UserInfo, verb, path string) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	field(user.Username)
	field(user.UID)
	field(verb)
	field(path)
	for _, group := range user.Groups {
		field(group)
	}
	h.Write([]byte{0})
	names := make([]string, 0, len(user.Extra))
	for name := range user.Extra {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		field(name)
		for _, value := range user.Extra[name] {
			field(value)
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// retryReview asks again while the API server fails to answer (no answer, throttled, its
// own errors), each request bounded; a refusal, such as a missing grant, is final.
func retryReview(ctx context.Context, ask func(context.Context) error) error {
	transient := func(err error) bool {
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			code := status.Status().Code
			return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
		}
		return ctx.Err() == nil
	}
	return retry.OnError(reviewBackoff, transient, func() error {
		ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		err := ask(ctx)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return fmt.Errorf("no answer within %s: %w", reviewTimeout, err)
		}
		return err
	})
}
