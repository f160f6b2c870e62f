"""Every error of the Kubernetes backend says what happened, what to do, and keeps the API's
own status and reason; none shows the kubeconfig's token."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubemill.kinds import load_one
from kubemill.substrates.base import JobNotFound, SubmitOptions, SubstrateError
from kubemill.substrates.kubernetes.client import KubernetesBackend
from kubemill.substrates.kubernetes.client.errors import (
    AccessDenied,
    ClusterUnreachable,
    CRDsNotInstalled,
    KubeApiError,
    KubeconfigError,
    OperatorNotActing,
)
from support.kube_client_support import (
    TOKEN,
    ClientClusterThread,
    closed_port,
    kmock_cluster,
    status_body,
)

JOB = """
apiVersion: kubemill.dev/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  pytorchReplicaSpecs:
    Master:
      template:
        spec:
          containers: [{name: pytorch, image: trainer:1, command: [python, ddp.py]}]
"""


def _submit(backend: KubernetesBackend, *, detach: bool = True) -> object:
    return backend.submit(load_one(JOB), SubmitOptions(detach=detach))


def _no_secret(exc: pytest.ExceptionInfo[BaseException]) -> None:
    assert TOKEN not in str(exc.value)
    assert "Bearer" not in str(exc.value)


# --- CRDs missing --------------------------------------------------------------------------

INSTALL = "run `kubemill install` (or `kubemill install --print | kubectl apply -f -`)"


EVERY_KIND = [
    "tfjobs.kubemill.dev",
    "pytorchjobs.kubemill.dev",
    "mpijobs.kubemill.dev",
    "sparkapplications.kubemill.dev",
    "marsclusters.kubemill.dev",
    "jaxjobs.kubemill.dev",
    "xgboostjobs.kubemill.dev",
    "paddlejobs.kubemill.dev",
    "trainjobs.kubemill.dev",
    "rayclusters.kubemill.dev",
    "rayjobs.kubemill.dev",
    "scheduledsparkapplications.kubemill.dev",
]


@pytest.mark.parametrize(
    ("action", "missing"),
    [
        pytest.param(lambda b: _submit(b), ["pytorchjobs.kubemill.dev"], id="submit"),
        pytest.param(lambda b: b.get("ddp"), EVERY_KIND, id="get"),
        pytest.param(lambda b: b.list(), EVERY_KIND, id="list"),
        pytest.param(lambda b: b.list("default"), EVERY_KIND, id="list-namespace"),
        pytest.param(lambda b: b.delete("ddp"), EVERY_KIND, id="delete"),
        pytest.param(lambda b: b.wait("ddp", timeout=1), EVERY_KIND, id="wait"),
        pytest.param(lambda b: list(b.logs("ddp", follow=True)), EVERY_KIND, id="logs"),
    ],
)
def test_without_crds_every_call_says_to_install_them(
    bare_cluster: ClientClusterThread, tmp_path: Path, action: object, missing: list[str]
) -> None:
    config = kmock_cluster.write_kubeconfig(tmp_path / "kc", bare_cluster.url)
    backend = KubernetesBackend(kubeconfig=config)
    with pytest.raises(CRDsNotInstalled) as exc:
        action(backend)  # type: ignore[operator]
    assert str(exc.value) == (
        f"the kubemill CRDs are not installed in this cluster ({bare_cluster.url}): "
        f"{', '.join(missing)} not served; {INSTALL}"
    )
    assert exc.value.missing == missing
    _no_secret(exc)
    # Told apart from a missing job through discovery, which the client asked.
    assert any(c.path == "/apis/kubemill.dev/v1" for c in bare_cluster.client_calls())


def test_a_partial_install_names_the_missing_crd(
    bare_cluster: ClientClusterThread, tmp_path: Path
) -> None:
    bare_cluster.install_crds(["TFJob"])
    config = kmock_cluster.write_kubeconfig(tmp_path / "kc", bare_cluster.url)
    with pytest.raises(CRDsNotInstalled, match=r"pytorchjobs\.kubemill\.dev not served") as exc:
        _submit(KubernetesBackend(kubeconfig=config))
    assert exc.value.missing == ["pytorchjobs.kubemill.dev"]
    # What is installed keeps working; a missing job says what is not installed.
    backend = KubernetesBackend(kubeconfig=config)
    assert backend.list() == []
    with pytest.raises(
        JobNotFound,
        match=r"no TFJob, PyTorchJob, MPIJob, SparkApplication, MarsCluster, JAXJob, XGBoostJob, "
        r"PaddleJob, TrainJob, RayCluster, RayJob or ScheduledSparkApplication .*"
        r"\(pytorchjobs.kubemill.dev, mpijobs.kubemill.dev, sparkapplications.kubemill.dev, "
        r"marsclusters.kubemill.dev, jaxjobs.kubemill.dev, xgboostjobs.kubemill.dev, "
        r"paddlejobs.kubemill.dev, trainjobs.kubemill.dev, rayclusters.kubemill.dev, "
        r"rayjobs.kubemill.dev, "
        r"scheduledsparkapplications.kubemill.dev are not "
        r"installed\)",
    ):
        backend.get("ddp")
    with pytest.raises(CRDsNotInstalled, match=r"pytorchjobs\.kubemill\.dev not served"):
        backend.get("pytorchjob/ddp")


# --- RBAC ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "api_message", "action", "expected"),
    [
        pytest.param(
            "POST",
            r"/namespaces/default/pytorchjobs$",
            'pytorchjobs.kubemill.dev is forbidden: User "alice" cannot create resource '
            '"pytorchjobs" in API group "kubemill.dev" in the namespace "default"',
            lambda b: _submit(b),
            ("create", "pytorchjobs", "kubemill.dev", 'in namespace "default"'),
            id="create-job",
        ),
        pytest.param(
            "GET",
            r"^/apis/kubemill.dev/v1/tfjobs$",
            'tfjobs.kubemill.dev is forbidden: User "alice" cannot list resource "tfjobs" in '
            'API group "kubemill.dev" at the cluster scope',
            lambda b: b.list(),
            ("list", "tfjobs", "kubemill.dev", "at the cluster scope"),
            id="list-all-namespaces",
        ),
        pytest.param(
            "GET",
            r"/namespaces/default/pods$",
            'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in '
            'the namespace "default"',
            lambda b: b.get("ddp"),
            ("list", "pods", "", 'in namespace "default"'),
            id="list-pods",
        ),
        pytest.param(
            "GET",
            r"/pods/ddp-master-0/log$",
            'pods "ddp-master-0" is forbidden: User "alice" cannot get resource "pods/log" in '
            'API group "" in the namespace "default"',
            lambda b: list(b.logs("ddp")),
            ("get", "pods/log", "", 'in namespace "default"'),
            id="pod-log",
        ),
        pytest.param(
            "GET",
            r"/namespaces/default/events$",
            "events is forbidden: the request was refused by an admission policy",
            lambda b: b.events("ddp"),
            ("list", "events", "", 'in namespace "default"'),
            id="not-rbac-wording",
        ),
    ],
)
def test_forbidden_says_which_verb_on_which_resource_is_missing(
    cluster: ClientClusterThread,
    backend: KubernetesBackend,
    method: str,
    path: str,
    api_message: str,
    action: object,
    expected: tuple[str, str, str, str],
) -> None:
    if method != "POST":  # the job (and a running pod) exist; reading them is refused
        _submit(backend)
        pod = cluster.create(
            "/api/v1/namespaces/default/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "ddp-master-0",
                    "labels": {"kubemill.dev/job-name": "ddp"},
                    "ownerReferences": [
                        {
                            "apiVersion": "kubemill.dev/v1",
                            "kind": "PyTorchJob",
                            "name": "ddp",
                            "uid": cluster.get(
                                "/apis/kubemill.dev/v1/namespaces/default/pytorchjobs/ddp"
                            )["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {"containers": [{"name": "pytorch", "image": "trainer:1"}]},
            },
        )
        cluster.patch(
            "/api/v1/namespaces/default/pods/ddp-master-0/status",
            {
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "pytorch", "restartCount": 0, "state": {"running": {}}}
                    ],
                }
            },
        )
        assert pod["metadata"]["name"] == "ddp-master-0"
    cluster.answer(
        method,
        path,
        403,
        status_body(403, "Forbidden", api_message, group=expected[2], kind=expected[1]),
    )
    verb, resource, group, where = expected

    with pytest.raises(AccessDenied) as exc:
        action(backend)  # type: ignore[operator]

    error = exc.value
    assert (error.status, error.reason) == (403, "Forbidden")
    assert (error.verb, error.resource, error.group) == (verb, resource, group)
    assert error.api_message == api_message
    text = str(error)
    full = f"{resource}.{group}" if group else resource
    assert text.startswith(f'forbidden: you may not "{verb}" {full} {where}')
    assert api_message in text  # the API's own words are kept
    assert f'resources: ["{resource}"], verbs: ["{verb}"]' in text
    assert f"kubectl auth can-i {verb} {full}" in text
    _no_secret(exc)


def test_listing_every_namespace_when_forbidden_suggests_a_namespace(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    cluster.answer(
        "GET",
        r"^/apis/kubemill.dev/v1/tfjobs$",
        403,
        status_body(
            403,
            "Forbidden",
            'tfjobs.kubemill.dev is forbidden: User "alice" cannot list resource "tfjobs" in '
            'API group "kubemill.dev" at the cluster scope',
        ),
    )
    with pytest.raises(AccessDenied, match=r"or name a namespace \(`-n NAMESPACE`\)"):
        backend.list()


def test_unauthorized_says_to_log_in_again(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    cluster.answer("GET", r"/tfjobs/ddp$", 401, status_body(401, "Unauthorized", "Unauthorized"))
    with pytest.raises(AccessDenied, match="did not accept your credentials") as exc:
        backend.get("ddp")
    assert exc.value.status == 401
    _no_secret(exc)


def test_other_api_errors_keep_status_reason_and_message(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    cluster.answer(
        "GET", r"/tfjobs/ddp$", 500, status_body(500, "InternalError", "etcdserver: timeout")
    )
    with pytest.raises(KubeApiError) as exc:
        backend.get("ddp")
    assert (exc.value.status, exc.value.reason, exc.value.api_message) == (
        500,
        "InternalError",
        "etcdserver: timeout",
    )
    assert str(exc.value) == (
        'get tfjobs.kubemill.dev ddp in namespace "default" failed: 500 InternalError: '
        "etcdserver: timeout; the API server is busy or failing: try again shortly"
    )


def test_an_invalid_object_says_so_with_the_api_reason(
    cluster: ClientClusterThread, backend: KubernetesBackend
) -> None:
    message = 'PyTorchJob.kubemill.dev "ddp" is invalid: spec.runPolicy: Invalid value'
    cluster.answer("POST", r"/pytorchjobs$", 422, status_body(422, "Invalid", message))
    with pytest.raises(KubeApiError, match=r"422 Invalid: .*kubemill validate") as exc:
        _submit(backend)
    assert exc.value.api_message == message


# --- no operator ---------------------------------------------------------------------------


def test_foreground_submit_says_when_no_operator_acts(
    cluster: ClientClusterThread, kubeconfig: Path
) -> None:
    backend = KubernetesBackend(kubeconfig=kubeconfig, operator_timeout=0.3)
    with pytest.raises(OperatorNotActing) as exc:
        _submit(backend, detach=False)
    text = str(exc.value)
    assert "PyTorchJob default/ddp has not been picked up" in text
    assert "0.3 s after it was submitted it has no condition and no pods" in text
    assert "is the kubemill operator running? see `kubectl -n kubemill-system get pods`" in (
        text.replace("Is the", "is the")
    )
    assert "kubemill delete ddp" in text
    # The job was created and stays.
    assert cluster.get("/apis/kubemill.dev/v1/namespaces/default/pytorchjobs/ddp")


def test_wait_says_when_no_operator_acts(cluster: ClientClusterThread, kubeconfig: Path) -> None:
    backend = KubernetesBackend(kubeconfig=kubeconfig, operator_timeout=0.3)
    _submit(backend)
    with pytest.raises(OperatorNotActing, match="has not been picked up"):
        backend.wait("ddp", timeout=30)


def test_pods_without_a_condition_count_as_the_operator_acting(
    cluster: ClientClusterThread, kubeconfig: Path
) -> None:
    backend = KubernetesBackend(kubeconfig=kubeconfig, operator_timeout=0.3)
    _submit(backend)
    uid = cluster.get("/apis/kubemill.dev/v1/namespaces/default/pytorchjobs/ddp")["metadata"]["uid"]
    cluster.create(
        "/api/v1/namespaces/default/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "ddp-master-0",
                "labels": {"kubemill.dev/job-name": "ddp"},
                "ownerReferences": [
                    {
                        "apiVersion": "kubemill.dev/v1",
                        "kind": "PyTorchJob",
                        "name": "ddp",
                        "uid": uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {"containers": [{"name": "pytorch", "image": "trainer:1"}]},
        },
    )
    view = backend.wait("ddp", timeout=0.8)
    assert not view.finished
    assert [r.name for r in view.replicas] == ["ddp-master-0"]


def test_operator_check_can_be_switched_off(cluster: ClientClusterThread, kubeconfig: Path) -> None:
    backend = KubernetesBackend(kubeconfig=kubeconfig, operator_timeout=0)
    view = _submit(backend, detach=False)
    assert view.phase == "Pending"  # type: ignore[attr-defined]
    assert not backend.wait("ddp", timeout=0.3).finished


# --- connection and kubeconfig -------------------------------------------------------------


def test_connection_refused_is_a_clear_message(tmp_path: Path) -> None:
    port = closed_port()
    config = kmock_cluster.write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{port}")
    backend = KubernetesBackend(kubeconfig=config)
    with pytest.raises(ClusterUnreachable) as exc:
        backend.get("ddp")
    assert str(exc.value) == (
        f"cannot reach the Kubernetes API server at http://127.0.0.1:{port} (context 'kmock'):"
        " Connection refused; is the cluster running and is this the right kubeconfig "
        "context? `kubectl cluster-info` checks it"
    )
    _no_secret(exc)


def test_a_missing_kubeconfig_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match=r"no kubeconfig at .*/nowhere: pass --kubeconfig"):
        KubernetesBackend(kubeconfig=tmp_path / "nowhere")


def test_no_kubeconfig_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeconfigError, match=r"no kubeconfig found \(looked at .*absent\)"):
        KubernetesBackend()


def test_an_unknown_context_lists_how_to_see_them(tmp_path: Path) -> None:
    config = kmock_cluster.write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:1")
    with pytest.raises(KubeconfigError, match=r"zzz.*`kubectl config get-contexts`") as exc:
        KubernetesBackend(kubeconfig=config, context="zzz")
    _no_secret(exc)


def test_a_broken_kubeconfig_does_not_show_its_secrets(tmp_path: Path) -> None:
    config = kmock_cluster.write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:1")
    data = yaml.safe_load(config.read_text())
    data["contexts"][0]["context"]["user"] = "ghost"  # a user entry that does not exist
    config.write_text(yaml.safe_dump(data))
    try:
        backend = KubernetesBackend(kubeconfig=config)
    except KubeconfigError as exc:
        assert TOKEN not in str(exc)
    else:  # the client may accept a context without credentials; then the call fails
        with pytest.raises(SubstrateError) as info:
            backend.get("ddp")
        _no_secret(info)
