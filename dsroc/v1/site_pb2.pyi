from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ScoreClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCORE_CLASS_UNSPECIFIED: _ClassVar[ScoreClass]
    SCORE_CLASS_NEGATIVES: _ClassVar[ScoreClass]
    SCORE_CLASS_POSITIVES: _ClassVar[ScoreClass]

class Link(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LINK_UNSPECIFIED: _ClassVar[Link]
    LINK_LOGIT: _ClassVar[Link]
    LINK_PROBIT: _ClassVar[Link]
SCORE_CLASS_UNSPECIFIED: ScoreClass
SCORE_CLASS_NEGATIVES: ScoreClass
SCORE_CLASS_POSITIVES: ScoreClass
LINK_UNSPECIFIED: Link
LINK_LOGIT: Link
LINK_PROBIT: Link

class Coefficient(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: float
    def __init__(self, name: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...

class GlmModel(_message.Message):
    __slots__ = ("link", "intercept", "coefficients")
    LINK_FIELD_NUMBER: _ClassVar[int]
    INTERCEPT_FIELD_NUMBER: _ClassVar[int]
    COEFFICIENTS_FIELD_NUMBER: _ClassVar[int]
    link: Link
    intercept: float
    coefficients: _containers.RepeatedCompositeFieldContainer[Coefficient]
    def __init__(self, link: _Optional[_Union[Link, str]] = ..., intercept: _Optional[float] = ..., coefficients: _Optional[_Iterable[_Union[Coefficient, _Mapping]]] = ...) -> None: ...

class ScoreSource(_message.Message):
    __slots__ = ("score_column", "model")
    SCORE_COLUMN_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    score_column: str
    model: GlmModel
    def __init__(self, score_column: _Optional[str] = ..., model: _Optional[_Union[GlmModel, _Mapping]] = ...) -> None: ...

class GridSpec(_message.Message):
    __slots__ = ("n_points", "thresholds")
    N_POINTS_FIELD_NUMBER: _ClassVar[int]
    THRESHOLDS_FIELD_NUMBER: _ClassVar[int]
    n_points: int
    thresholds: Values
    def __init__(self, n_points: _Optional[int] = ..., thresholds: _Optional[_Union[Values, _Mapping]] = ...) -> None: ...

class Values(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ("queries",)
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    queries: _containers.RepeatedCompositeFieldContainer[ReleaseQuery]
    def __init__(self, queries: _Optional[_Iterable[_Union[ReleaseQuery, _Mapping]]] = ...) -> None: ...

class Column(_message.Message):
    __slots__ = ("name", "dtype")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: str
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[str] = ...) -> None: ...

class BudgetStatus(_message.Message):
    __slots__ = ("dataset", "budget_epsilon", "budget_delta", "mu_budget", "mu_spent", "mu_remaining", "epsilon_spent", "releases", "delta_spent", "epsilon_remaining", "accounting", "reservations", "left")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    BUDGET_EPSILON_FIELD_NUMBER: _ClassVar[int]
    BUDGET_DELTA_FIELD_NUMBER: _ClassVar[int]
    MU_BUDGET_FIELD_NUMBER: _ClassVar[int]
    MU_SPENT_FIELD_NUMBER: _ClassVar[int]
    MU_REMAINING_FIELD_NUMBER: _ClassVar[int]
    EPSILON_SPENT_FIELD_NUMBER: _ClassVar[int]
    RELEASES_FIELD_NUMBER: _ClassVar[int]
    DELTA_SPENT_FIELD_NUMBER: _ClassVar[int]
    EPSILON_REMAINING_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTING_FIELD_NUMBER: _ClassVar[int]
    RESERVATIONS_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    budget_epsilon: float
    budget_delta: float
    mu_budget: float
    mu_spent: float
    mu_remaining: float
    epsilon_spent: float
    releases: int
    delta_spent: float
    epsilon_remaining: float
    accounting: str
    reservations: int
    left: _containers.RepeatedCompositeFieldContainer[ReleasesLeft]
    def __init__(self, dataset: _Optional[str] = ..., budget_epsilon: _Optional[float] = ..., budget_delta: _Optional[float] = ..., mu_budget: _Optional[float] = ..., mu_spent: _Optional[float] = ..., mu_remaining: _Optional[float] = ..., epsilon_spent: _Optional[float] = ..., releases: _Optional[int] = ..., delta_spent: _Optional[float] = ..., epsilon_remaining: _Optional[float] = ..., accounting: _Optional[str] = ..., reservations: _Optional[int] = ..., left: _Optional[_Iterable[_Union[ReleasesLeft, _Mapping]]] = ...) -> None: ...

class ReleaseQuery(_message.Message):
    __slots__ = ("protocol", "epsilon", "delta", "scalars", "count_share", "score_sums")
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    SCALARS_FIELD_NUMBER: _ClassVar[int]
    COUNT_SHARE_FIELD_NUMBER: _ClassVar[int]
    SCORE_SUMS_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    epsilon: float
    delta: float
    scalars: _containers.RepeatedScalarFieldContainer[str]
    count_share: float
    score_sums: bool
    def __init__(self, protocol: _Optional[str] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., scalars: _Optional[_Iterable[str]] = ..., count_share: _Optional[float] = ..., score_sums: _Optional[bool] = ...) -> None: ...

class ReleasesLeft(_message.Message):
    __slots__ = ("query", "releases", "at_least", "refused")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    RELEASES_FIELD_NUMBER: _ClassVar[int]
    AT_LEAST_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    query: ReleaseQuery
    releases: int
    at_least: bool
    refused: str
    def __init__(self, query: _Optional[_Union[ReleaseQuery, _Mapping]] = ..., releases: _Optional[int] = ..., at_least: _Optional[bool] = ..., refused: _Optional[str] = ...) -> None: ...

class DatasetInfo(_message.Message):
    __slots__ = ("name", "description", "columns", "outcome_columns", "score_columns", "score_min", "score_max", "sensitivity_rule", "budget", "time_columns")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    SCORE_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    SCORE_MIN_FIELD_NUMBER: _ClassVar[int]
    SCORE_MAX_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_RULE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    TIME_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    columns: _containers.RepeatedCompositeFieldContainer[Column]
    outcome_columns: _containers.RepeatedScalarFieldContainer[str]
    score_columns: _containers.RepeatedScalarFieldContainer[str]
    score_min: float
    score_max: float
    sensitivity_rule: str
    budget: BudgetStatus
    time_columns: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., outcome_columns: _Optional[_Iterable[str]] = ..., score_columns: _Optional[_Iterable[str]] = ..., score_min: _Optional[float] = ..., score_max: _Optional[float] = ..., sensitivity_rule: _Optional[str] = ..., budget: _Optional[_Union[BudgetStatus, _Mapping]] = ..., time_columns: _Optional[_Iterable[str]] = ...) -> None: ...

class Policy(_message.Message):
    __slots__ = ("privacy_level", "max_epsilon", "max_delta", "budget_epsilon", "budget_delta", "sensitivity_rule", "max_glm_evaluations", "max_thresholds", "session_idle_seconds", "max_chunk_scores", "max_survivor_scores", "max_survivor_uploads", "max_models", "threshold_steps", "protocols", "histogram_bins", "histogram_spacings", "histogram_logit_min", "histogram_logit_max", "privacy_unit", "max_calls_in_progress", "secagg_colluders", "secagg_min_sites", "strata", "histogram_max_cells", "survival_time_edges", "survival_max_time_bins", "survival_max_tau", "survival_min_censoring_survival")
    PRIVACY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    MAX_EPSILON_FIELD_NUMBER: _ClassVar[int]
    MAX_DELTA_FIELD_NUMBER: _ClassVar[int]
    BUDGET_EPSILON_FIELD_NUMBER: _ClassVar[int]
    BUDGET_DELTA_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_RULE_FIELD_NUMBER: _ClassVar[int]
    MAX_GLM_EVALUATIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_THRESHOLDS_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDLE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_SCORES_FIELD_NUMBER: _ClassVar[int]
    MAX_SURVIVOR_SCORES_FIELD_NUMBER: _ClassVar[int]
    MAX_SURVIVOR_UPLOADS_FIELD_NUMBER: _ClassVar[int]
    MAX_MODELS_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_STEPS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_BINS_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_SPACINGS_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_LOGIT_MIN_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_LOGIT_MAX_FIELD_NUMBER: _ClassVar[int]
    PRIVACY_UNIT_FIELD_NUMBER: _ClassVar[int]
    MAX_CALLS_IN_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SECAGG_COLLUDERS_FIELD_NUMBER: _ClassVar[int]
    SECAGG_MIN_SITES_FIELD_NUMBER: _ClassVar[int]
    STRATA_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_MAX_CELLS_FIELD_NUMBER: _ClassVar[int]
    SURVIVAL_TIME_EDGES_FIELD_NUMBER: _ClassVar[int]
    SURVIVAL_MAX_TIME_BINS_FIELD_NUMBER: _ClassVar[int]
    SURVIVAL_MAX_TAU_FIELD_NUMBER: _ClassVar[int]
    SURVIVAL_MIN_CENSORING_SURVIVAL_FIELD_NUMBER: _ClassVar[int]
    privacy_level: int
    max_epsilon: float
    max_delta: float
    budget_epsilon: float
    budget_delta: float
    sensitivity_rule: str
    max_glm_evaluations: int
    max_thresholds: int
    session_idle_seconds: float
    max_chunk_scores: int
    max_survivor_scores: int
    max_survivor_uploads: int
    max_models: int
    threshold_steps: int
    protocols: _containers.RepeatedScalarFieldContainer[str]
    histogram_bins: _containers.RepeatedScalarFieldContainer[int]
    histogram_spacings: _containers.RepeatedScalarFieldContainer[str]
    histogram_logit_min: float
    histogram_logit_max: float
    privacy_unit: str
    max_calls_in_progress: int
    secagg_colluders: int
    secagg_min_sites: int
    strata: _containers.RepeatedCompositeFieldContainer[StrataColumn]
    histogram_max_cells: int
    survival_time_edges: _containers.RepeatedScalarFieldContainer[float]
    survival_max_time_bins: int
    survival_max_tau: float
    survival_min_censoring_survival: float
    def __init__(self, privacy_level: _Optional[int] = ..., max_epsilon: _Optional[float] = ..., max_delta: _Optional[float] = ..., budget_epsilon: _Optional[float] = ..., budget_delta: _Optional[float] = ..., sensitivity_rule: _Optional[str] = ..., max_glm_evaluations: _Optional[int] = ..., max_thresholds: _Optional[int] = ..., session_idle_seconds: _Optional[float] = ..., max_chunk_scores: _Optional[int] = ..., max_survivor_scores: _Optional[int] = ..., max_survivor_uploads: _Optional[int] = ..., max_models: _Optional[int] = ..., threshold_steps: _Optional[int] = ..., protocols: _Optional[_Iterable[str]] = ..., histogram_bins: _Optional[_Iterable[int]] = ..., histogram_spacings: _Optional[_Iterable[str]] = ..., histogram_logit_min: _Optional[float] = ..., histogram_logit_max: _Optional[float] = ..., privacy_unit: _Optional[str] = ..., max_calls_in_progress: _Optional[int] = ..., secagg_colluders: _Optional[int] = ..., secagg_min_sites: _Optional[int] = ..., strata: _Optional[_Iterable[_Union[StrataColumn, _Mapping]]] = ..., histogram_max_cells: _Optional[int] = ..., survival_time_edges: _Optional[_Iterable[float]] = ..., survival_max_time_bins: _Optional[int] = ..., survival_max_tau: _Optional[float] = ..., survival_min_censoring_survival: _Optional[float] = ...) -> None: ...

class StrataColumn(_message.Message):
    __slots__ = ("column", "cuts")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    CUTS_FIELD_NUMBER: _ClassVar[int]
    column: str
    cuts: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, column: _Optional[str] = ..., cuts: _Optional[_Iterable[float]] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("site_name", "api_version", "policy", "datasets")
    SITE_NAME_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    site_name: str
    api_version: str
    policy: Policy
    datasets: _containers.RepeatedCompositeFieldContainer[DatasetInfo]
    def __init__(self, site_name: _Optional[str] = ..., api_version: _Optional[str] = ..., policy: _Optional[_Union[Policy, _Mapping]] = ..., datasets: _Optional[_Iterable[_Union[DatasetInfo, _Mapping]]] = ...) -> None: ...

class OpenSessionRequest(_message.Message):
    __slots__ = ("dataset", "outcome", "score", "with_sensitivity", "prepare", "time")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    WITH_SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    PREPARE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    outcome: str
    score: ScoreSource
    with_sensitivity: bool
    prepare: PrepareRequest
    time: str
    def __init__(self, dataset: _Optional[str] = ..., outcome: _Optional[str] = ..., score: _Optional[_Union[ScoreSource, _Mapping]] = ..., with_sensitivity: _Optional[bool] = ..., prepare: _Optional[_Union[PrepareRequest, _Mapping]] = ..., time: _Optional[str] = ...) -> None: ...

class OpenSessionResponse(_message.Message):
    __slots__ = ("session_id", "idle_timeout_seconds", "score_source", "policy", "sensitivity", "prepared")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SCORE_SOURCE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    PREPARED_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    idle_timeout_seconds: float
    score_source: str
    policy: Policy
    sensitivity: SensitivityResponse
    prepared: PrepareResponse
    def __init__(self, session_id: _Optional[str] = ..., idle_timeout_seconds: _Optional[float] = ..., score_source: _Optional[str] = ..., policy: _Optional[_Union[Policy, _Mapping]] = ..., sensitivity: _Optional[_Union[SensitivityResponse, _Mapping]] = ..., prepared: _Optional[_Union[PrepareResponse, _Mapping]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BudgetRequest(_message.Message):
    __slots__ = ("dataset", "queries")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    queries: _containers.RepeatedCompositeFieldContainer[ReleaseQuery]
    def __init__(self, dataset: _Optional[str] = ..., queries: _Optional[_Iterable[_Union[ReleaseQuery, _Mapping]]] = ...) -> None: ...

class PrepareRequest(_message.Message):
    __slots__ = ("scores", "histogram", "boyd", "survival", "hold_seconds", "follow_up", "follow_up_reservation_id")
    SCORES_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_FIELD_NUMBER: _ClassVar[int]
    BOYD_FIELD_NUMBER: _ClassVar[int]
    SURVIVAL_FIELD_NUMBER: _ClassVar[int]
    HOLD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    scores: ReleaseRequest
    histogram: HistogramRequest
    boyd: BoydRequest
    survival: SurvivalRequest
    hold_seconds: float
    follow_up: HistogramRequest
    follow_up_reservation_id: str
    def __init__(self, scores: _Optional[_Union[ReleaseRequest, _Mapping]] = ..., histogram: _Optional[_Union[HistogramRequest, _Mapping]] = ..., boyd: _Optional[_Union[BoydRequest, _Mapping]] = ..., survival: _Optional[_Union[SurvivalRequest, _Mapping]] = ..., hold_seconds: _Optional[float] = ..., follow_up: _Optional[_Union[HistogramRequest, _Mapping]] = ..., follow_up_reservation_id: _Optional[str] = ...) -> None: ...

class PrepareResponse(_message.Message):
    __slots__ = ("reservation_id", "expires_in_seconds", "repeated", "budget", "follow_up_reservation_id")
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REPEATED_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    reservation_id: str
    expires_in_seconds: float
    repeated: bool
    budget: BudgetStatus
    follow_up_reservation_id: str
    def __init__(self, reservation_id: _Optional[str] = ..., expires_in_seconds: _Optional[float] = ..., repeated: _Optional[bool] = ..., budget: _Optional[_Union[BudgetStatus, _Mapping]] = ..., follow_up_reservation_id: _Optional[str] = ...) -> None: ...

class CancelReservationRequest(_message.Message):
    __slots__ = ("reservation_id",)
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    reservation_id: str
    def __init__(self, reservation_id: _Optional[str] = ...) -> None: ...

class CancelReservationResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    def __init__(self, cancelled: _Optional[bool] = ...) -> None: ...

class BudgetResponse(_message.Message):
    __slots__ = ("budget",)
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    budget: BudgetStatus
    def __init__(self, budget: _Optional[_Union[BudgetStatus, _Mapping]] = ...) -> None: ...

class SensitivityRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SensitivityResponse(_message.Message):
    __slots__ = ("sensitivity", "rule", "formal_bound", "note")
    SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    FORMAL_BOUND_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    sensitivity: float
    rule: str
    formal_bound: bool
    note: str
    def __init__(self, sensitivity: _Optional[float] = ..., rule: _Optional[str] = ..., formal_bound: _Optional[bool] = ..., note: _Optional[str] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("session_id", "score_class", "epsilon", "delta", "sensitivity", "chunk_size", "reservation_id", "both_classes")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_CLASS_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    BOTH_CLASSES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    score_class: ScoreClass
    epsilon: float
    delta: float
    sensitivity: float
    chunk_size: int
    reservation_id: str
    both_classes: bool
    def __init__(self, session_id: _Optional[str] = ..., score_class: _Optional[_Union[ScoreClass, str]] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., sensitivity: _Optional[float] = ..., chunk_size: _Optional[int] = ..., reservation_id: _Optional[str] = ..., both_classes: _Optional[bool] = ...) -> None: ...

class ReleaseInfo(_message.Message):
    __slots__ = ("score_class", "n", "sensitivity", "tau", "epsilon", "delta", "mu", "mu_charged", "repeated", "release_id", "rule", "site", "population", "dataset", "source", "outcome", "values_sha256", "signature", "other_n", "other_values_sha256", "pair_signature")
    SCORE_CLASS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    TAU_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    MU_FIELD_NUMBER: _ClassVar[int]
    MU_CHARGED_FIELD_NUMBER: _ClassVar[int]
    REPEATED_FIELD_NUMBER: _ClassVar[int]
    RELEASE_ID_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    POPULATION_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    VALUES_SHA256_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    OTHER_N_FIELD_NUMBER: _ClassVar[int]
    OTHER_VALUES_SHA256_FIELD_NUMBER: _ClassVar[int]
    PAIR_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    score_class: ScoreClass
    n: int
    sensitivity: float
    tau: float
    epsilon: float
    delta: float
    mu: float
    mu_charged: float
    repeated: bool
    release_id: str
    rule: str
    site: str
    population: str
    dataset: str
    source: str
    outcome: str
    values_sha256: str
    signature: bytes
    other_n: int
    other_values_sha256: str
    pair_signature: bytes
    def __init__(self, score_class: _Optional[_Union[ScoreClass, str]] = ..., n: _Optional[int] = ..., sensitivity: _Optional[float] = ..., tau: _Optional[float] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., mu: _Optional[float] = ..., mu_charged: _Optional[float] = ..., repeated: _Optional[bool] = ..., release_id: _Optional[str] = ..., rule: _Optional[str] = ..., site: _Optional[str] = ..., population: _Optional[str] = ..., dataset: _Optional[str] = ..., source: _Optional[str] = ..., outcome: _Optional[str] = ..., values_sha256: _Optional[str] = ..., signature: _Optional[bytes] = ..., other_n: _Optional[int] = ..., other_values_sha256: _Optional[str] = ..., pair_signature: _Optional[bytes] = ...) -> None: ...

class ReleaseChunk(_message.Message):
    __slots__ = ("info", "scores", "offset")
    INFO_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    info: ReleaseInfo
    scores: bytes
    offset: int
    def __init__(self, info: _Optional[_Union[ReleaseInfo, _Mapping]] = ..., scores: _Optional[bytes] = ..., offset: _Optional[int] = ...) -> None: ...

class SurvivorHeader(_message.Message):
    __slots__ = ("session_id", "score_class", "n", "segments", "answers")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_CLASS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    score_class: ScoreClass
    n: int
    segments: _containers.RepeatedCompositeFieldContainer[ReleaseInfo]
    answers: PaperAggregatesRequest
    def __init__(self, session_id: _Optional[str] = ..., score_class: _Optional[_Union[ScoreClass, str]] = ..., n: _Optional[int] = ..., segments: _Optional[_Iterable[_Union[ReleaseInfo, _Mapping]]] = ..., answers: _Optional[_Union[PaperAggregatesRequest, _Mapping]] = ...) -> None: ...

class SurvivorChunk(_message.Message):
    __slots__ = ("header", "scores")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    header: SurvivorHeader
    scores: bytes
    def __init__(self, header: _Optional[_Union[SurvivorHeader, _Mapping]] = ..., scores: _Optional[bytes] = ...) -> None: ...

class UploadSurvivorResponse(_message.Message):
    __slots__ = ("score_class", "n_received", "evaluations_left", "survivor_id")
    SCORE_CLASS_FIELD_NUMBER: _ClassVar[int]
    N_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    EVALUATIONS_LEFT_FIELD_NUMBER: _ClassVar[int]
    SURVIVOR_ID_FIELD_NUMBER: _ClassVar[int]
    score_class: ScoreClass
    n_received: int
    evaluations_left: int
    survivor_id: str
    def __init__(self, score_class: _Optional[_Union[ScoreClass, str]] = ..., n_received: _Optional[int] = ..., evaluations_left: _Optional[int] = ..., survivor_id: _Optional[str] = ...) -> None: ...

class UploadSurvivorsResponse(_message.Message):
    __slots__ = ("survivors", "answers")
    SURVIVORS_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    survivors: _containers.RepeatedCompositeFieldContainer[UploadSurvivorResponse]
    answers: PaperAggregatesResponse
    def __init__(self, survivors: _Optional[_Iterable[_Union[UploadSurvivorResponse, _Mapping]]] = ..., answers: _Optional[_Union[PaperAggregatesResponse, _Mapping]] = ...) -> None: ...

class RocGlmPartsRequest(_message.Message):
    __slots__ = ("session_id", "theta", "grid")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    THETA_FIELD_NUMBER: _ClassVar[int]
    GRID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    theta: _containers.RepeatedScalarFieldContainer[float]
    grid: GridSpec
    def __init__(self, session_id: _Optional[str] = ..., theta: _Optional[_Iterable[float]] = ..., grid: _Optional[_Union[GridSpec, _Mapping]] = ...) -> None: ...

class RocGlmPartsResponse(_message.Message):
    __slots__ = ("score", "information", "deviance", "evaluations_left", "n_thresholds")
    SCORE_FIELD_NUMBER: _ClassVar[int]
    INFORMATION_FIELD_NUMBER: _ClassVar[int]
    DEVIANCE_FIELD_NUMBER: _ClassVar[int]
    EVALUATIONS_LEFT_FIELD_NUMBER: _ClassVar[int]
    N_THRESHOLDS_FIELD_NUMBER: _ClassVar[int]
    score: _containers.RepeatedScalarFieldContainer[float]
    information: _containers.RepeatedScalarFieldContainer[float]
    deviance: float
    evaluations_left: int
    n_thresholds: int
    def __init__(self, score: _Optional[_Iterable[float]] = ..., information: _Optional[_Iterable[float]] = ..., deviance: _Optional[float] = ..., evaluations_left: _Optional[int] = ..., n_thresholds: _Optional[int] = ...) -> None: ...

class GlobalMeans(_message.Message):
    __slots__ = ("mean_pv0", "mean_pv1")
    MEAN_PV0_FIELD_NUMBER: _ClassVar[int]
    MEAN_PV1_FIELD_NUMBER: _ClassVar[int]
    mean_pv0: float
    mean_pv1: float
    def __init__(self, mean_pv0: _Optional[float] = ..., mean_pv1: _Optional[float] = ...) -> None: ...

class PlacementMomentsRequest(_message.Message):
    __slots__ = ("session_id", "global_means")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_MEANS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    global_means: GlobalMeans
    def __init__(self, session_id: _Optional[str] = ..., global_means: _Optional[_Union[GlobalMeans, _Mapping]] = ...) -> None: ...

class MeanParts(_message.Message):
    __slots__ = ("total", "n")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    total: float
    n: int
    def __init__(self, total: _Optional[float] = ..., n: _Optional[int] = ...) -> None: ...

class PlacementMomentsResponse(_message.Message):
    __slots__ = ("pv0", "pv1", "ssd_pv0", "ssd_pv1", "second_pass", "local_ssd_pv0", "local_ssd_pv1")
    PV0_FIELD_NUMBER: _ClassVar[int]
    PV1_FIELD_NUMBER: _ClassVar[int]
    SSD_PV0_FIELD_NUMBER: _ClassVar[int]
    SSD_PV1_FIELD_NUMBER: _ClassVar[int]
    SECOND_PASS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_SSD_PV0_FIELD_NUMBER: _ClassVar[int]
    LOCAL_SSD_PV1_FIELD_NUMBER: _ClassVar[int]
    pv0: MeanParts
    pv1: MeanParts
    ssd_pv0: float
    ssd_pv1: float
    second_pass: bool
    local_ssd_pv0: float
    local_ssd_pv1: float
    def __init__(self, pv0: _Optional[_Union[MeanParts, _Mapping]] = ..., pv1: _Optional[_Union[MeanParts, _Mapping]] = ..., ssd_pv0: _Optional[float] = ..., ssd_pv1: _Optional[float] = ..., second_pass: _Optional[bool] = ..., local_ssd_pv0: _Optional[float] = ..., local_ssd_pv1: _Optional[float] = ...) -> None: ...

class BrierPartsRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class BrierPartsResponse(_message.Message):
    __slots__ = ("sum_sq", "n")
    SUM_SQ_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    sum_sq: float
    n: int
    def __init__(self, sum_sq: _Optional[float] = ..., n: _Optional[int] = ...) -> None: ...

class CalibrationPartsRequest(_message.Message):
    __slots__ = ("session_id", "n_bins", "edges")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    N_BINS_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    n_bins: int
    edges: Values
    def __init__(self, session_id: _Optional[str] = ..., n_bins: _Optional[int] = ..., edges: _Optional[_Union[Values, _Mapping]] = ...) -> None: ...

class CalibrationBin(_message.Message):
    __slots__ = ("index", "count", "sum_scores", "sum_labels")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SUM_SCORES_FIELD_NUMBER: _ClassVar[int]
    SUM_LABELS_FIELD_NUMBER: _ClassVar[int]
    index: int
    count: int
    sum_scores: float
    sum_labels: float
    def __init__(self, index: _Optional[int] = ..., count: _Optional[int] = ..., sum_scores: _Optional[float] = ..., sum_labels: _Optional[float] = ...) -> None: ...

class CalibrationPartsResponse(_message.Message):
    __slots__ = ("edges", "bins", "suppressed")
    EDGES_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    SUPPRESSED_FIELD_NUMBER: _ClassVar[int]
    edges: _containers.RepeatedScalarFieldContainer[float]
    bins: _containers.RepeatedCompositeFieldContainer[CalibrationBin]
    suppressed: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, edges: _Optional[_Iterable[float]] = ..., bins: _Optional[_Iterable[_Union[CalibrationBin, _Mapping]]] = ..., suppressed: _Optional[_Iterable[int]] = ...) -> None: ...

class ConfusionPartsRequest(_message.Message):
    __slots__ = ("session_id", "threshold")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    threshold: float
    def __init__(self, session_id: _Optional[str] = ..., threshold: _Optional[float] = ...) -> None: ...

class ConfusionPartsResponse(_message.Message):
    __slots__ = ("tp", "fp", "fn", "tn")
    TP_FIELD_NUMBER: _ClassVar[int]
    FP_FIELD_NUMBER: _ClassVar[int]
    FN_FIELD_NUMBER: _ClassVar[int]
    TN_FIELD_NUMBER: _ClassVar[int]
    tp: int
    fp: int
    fn: int
    tn: int
    def __init__(self, tp: _Optional[int] = ..., fp: _Optional[int] = ..., fn: _Optional[int] = ..., tn: _Optional[int] = ...) -> None: ...

class PaperAggregatesRequest(_message.Message):
    __slots__ = ("session_id", "calibration", "confusion", "rocglm")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CALIBRATION_FIELD_NUMBER: _ClassVar[int]
    CONFUSION_FIELD_NUMBER: _ClassVar[int]
    ROCGLM_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    calibration: CalibrationPartsRequest
    confusion: ConfusionPartsRequest
    rocglm: RocGlmPartsRequest
    def __init__(self, session_id: _Optional[str] = ..., calibration: _Optional[_Union[CalibrationPartsRequest, _Mapping]] = ..., confusion: _Optional[_Union[ConfusionPartsRequest, _Mapping]] = ..., rocglm: _Optional[_Union[RocGlmPartsRequest, _Mapping]] = ...) -> None: ...

class PaperAggregatesResponse(_message.Message):
    __slots__ = ("moments", "brier", "calibration", "budget", "confusion", "rocglm")
    MOMENTS_FIELD_NUMBER: _ClassVar[int]
    BRIER_FIELD_NUMBER: _ClassVar[int]
    CALIBRATION_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    CONFUSION_FIELD_NUMBER: _ClassVar[int]
    ROCGLM_FIELD_NUMBER: _ClassVar[int]
    moments: PlacementMomentsResponse
    brier: BrierPartsResponse
    calibration: CalibrationPartsResponse
    budget: BudgetStatus
    confusion: ConfusionPartsResponse
    rocglm: RocGlmPartsResponse
    def __init__(self, moments: _Optional[_Union[PlacementMomentsResponse, _Mapping]] = ..., brier: _Optional[_Union[BrierPartsResponse, _Mapping]] = ..., calibration: _Optional[_Union[CalibrationPartsResponse, _Mapping]] = ..., budget: _Optional[_Union[BudgetStatus, _Mapping]] = ..., confusion: _Optional[_Union[ConfusionPartsResponse, _Mapping]] = ..., rocglm: _Optional[_Union[RocGlmPartsResponse, _Mapping]] = ...) -> None: ...

class HistogramRequest(_message.Message):
    __slots__ = ("session_id", "epsilon", "delta", "n_bins", "spacing", "scalars", "score_sums", "reservation_id", "edges", "strata_column", "compare_session_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    N_BINS_FIELD_NUMBER: _ClassVar[int]
    SPACING_FIELD_NUMBER: _ClassVar[int]
    SCALARS_FIELD_NUMBER: _ClassVar[int]
    SCORE_SUMS_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    STRATA_COLUMN_FIELD_NUMBER: _ClassVar[int]
    COMPARE_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    epsilon: float
    delta: float
    n_bins: int
    spacing: str
    scalars: _containers.RepeatedScalarFieldContainer[str]
    score_sums: bool
    reservation_id: str
    edges: _containers.RepeatedScalarFieldContainer[float]
    strata_column: str
    compare_session_id: str
    def __init__(self, session_id: _Optional[str] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., n_bins: _Optional[int] = ..., spacing: _Optional[str] = ..., scalars: _Optional[_Iterable[str]] = ..., score_sums: _Optional[bool] = ..., reservation_id: _Optional[str] = ..., edges: _Optional[_Iterable[float]] = ..., strata_column: _Optional[str] = ..., compare_session_id: _Optional[str] = ...) -> None: ...

class NoisyScalar(_message.Message):
    __slots__ = ("name", "value", "noise_sd", "resolution")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    NOISE_SD_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: float
    noise_sd: float
    resolution: float
    def __init__(self, name: _Optional[str] = ..., value: _Optional[float] = ..., noise_sd: _Optional[float] = ..., resolution: _Optional[float] = ...) -> None: ...

class HistogramResponse(_message.Message):
    __slots__ = ("edges", "negatives", "positives", "sigma", "noise_sd", "epsilon", "delta", "privacy_unit", "scalars", "repeated", "release_id", "epsilon_spent", "negative_sums", "positive_sums", "sums_noise_sd", "sums_resolution", "parts", "strata_cuts", "compare_edges", "mechanism")
    EDGES_FIELD_NUMBER: _ClassVar[int]
    NEGATIVES_FIELD_NUMBER: _ClassVar[int]
    POSITIVES_FIELD_NUMBER: _ClassVar[int]
    SIGMA_FIELD_NUMBER: _ClassVar[int]
    NOISE_SD_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    PRIVACY_UNIT_FIELD_NUMBER: _ClassVar[int]
    SCALARS_FIELD_NUMBER: _ClassVar[int]
    REPEATED_FIELD_NUMBER: _ClassVar[int]
    RELEASE_ID_FIELD_NUMBER: _ClassVar[int]
    EPSILON_SPENT_FIELD_NUMBER: _ClassVar[int]
    NEGATIVE_SUMS_FIELD_NUMBER: _ClassVar[int]
    POSITIVE_SUMS_FIELD_NUMBER: _ClassVar[int]
    SUMS_NOISE_SD_FIELD_NUMBER: _ClassVar[int]
    SUMS_RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    STRATA_CUTS_FIELD_NUMBER: _ClassVar[int]
    COMPARE_EDGES_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    edges: _containers.RepeatedScalarFieldContainer[float]
    negatives: _containers.RepeatedScalarFieldContainer[int]
    positives: _containers.RepeatedScalarFieldContainer[int]
    sigma: float
    noise_sd: float
    epsilon: float
    delta: float
    privacy_unit: str
    scalars: _containers.RepeatedCompositeFieldContainer[NoisyScalar]
    repeated: bool
    release_id: str
    epsilon_spent: float
    negative_sums: _containers.RepeatedScalarFieldContainer[float]
    positive_sums: _containers.RepeatedScalarFieldContainer[float]
    sums_noise_sd: float
    sums_resolution: float
    parts: int
    strata_cuts: _containers.RepeatedScalarFieldContainer[float]
    compare_edges: _containers.RepeatedScalarFieldContainer[float]
    mechanism: str
    def __init__(self, edges: _Optional[_Iterable[float]] = ..., negatives: _Optional[_Iterable[int]] = ..., positives: _Optional[_Iterable[int]] = ..., sigma: _Optional[float] = ..., noise_sd: _Optional[float] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., privacy_unit: _Optional[str] = ..., scalars: _Optional[_Iterable[_Union[NoisyScalar, _Mapping]]] = ..., repeated: _Optional[bool] = ..., release_id: _Optional[str] = ..., epsilon_spent: _Optional[float] = ..., negative_sums: _Optional[_Iterable[float]] = ..., positive_sums: _Optional[_Iterable[float]] = ..., sums_noise_sd: _Optional[float] = ..., sums_resolution: _Optional[float] = ..., parts: _Optional[int] = ..., strata_cuts: _Optional[_Iterable[float]] = ..., compare_edges: _Optional[_Iterable[float]] = ..., mechanism: _Optional[str] = ...) -> None: ...

class SurvivalRequest(_message.Message):
    __slots__ = ("session_id", "epsilon", "delta", "time_edges", "n_bins", "spacing", "edges", "risk_sums", "reservation_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    TIME_EDGES_FIELD_NUMBER: _ClassVar[int]
    N_BINS_FIELD_NUMBER: _ClassVar[int]
    SPACING_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    RISK_SUMS_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    epsilon: float
    delta: float
    time_edges: _containers.RepeatedScalarFieldContainer[float]
    n_bins: int
    spacing: str
    edges: _containers.RepeatedScalarFieldContainer[float]
    risk_sums: bool
    reservation_id: str
    def __init__(self, session_id: _Optional[str] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., time_edges: _Optional[_Iterable[float]] = ..., n_bins: _Optional[int] = ..., spacing: _Optional[str] = ..., edges: _Optional[_Iterable[float]] = ..., risk_sums: _Optional[bool] = ..., reservation_id: _Optional[str] = ...) -> None: ...

class SurvivalResponse(_message.Message):
    __slots__ = ("time_edges", "edges", "counts", "offsets", "squares", "sigma", "noise_sd", "sums_sigma", "sums_noise_sd", "sums_resolution", "epsilon", "delta", "privacy_unit", "mechanism", "repeated", "release_id", "epsilon_spent")
    TIME_EDGES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    SQUARES_FIELD_NUMBER: _ClassVar[int]
    SIGMA_FIELD_NUMBER: _ClassVar[int]
    NOISE_SD_FIELD_NUMBER: _ClassVar[int]
    SUMS_SIGMA_FIELD_NUMBER: _ClassVar[int]
    SUMS_NOISE_SD_FIELD_NUMBER: _ClassVar[int]
    SUMS_RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    PRIVACY_UNIT_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    REPEATED_FIELD_NUMBER: _ClassVar[int]
    RELEASE_ID_FIELD_NUMBER: _ClassVar[int]
    EPSILON_SPENT_FIELD_NUMBER: _ClassVar[int]
    time_edges: _containers.RepeatedScalarFieldContainer[float]
    edges: _containers.RepeatedScalarFieldContainer[float]
    counts: _containers.RepeatedScalarFieldContainer[int]
    offsets: _containers.RepeatedScalarFieldContainer[int]
    squares: _containers.RepeatedScalarFieldContainer[int]
    sigma: float
    noise_sd: float
    sums_sigma: float
    sums_noise_sd: float
    sums_resolution: float
    epsilon: float
    delta: float
    privacy_unit: str
    mechanism: str
    repeated: bool
    release_id: str
    epsilon_spent: float
    def __init__(self, time_edges: _Optional[_Iterable[float]] = ..., edges: _Optional[_Iterable[float]] = ..., counts: _Optional[_Iterable[int]] = ..., offsets: _Optional[_Iterable[int]] = ..., squares: _Optional[_Iterable[int]] = ..., sigma: _Optional[float] = ..., noise_sd: _Optional[float] = ..., sums_sigma: _Optional[float] = ..., sums_noise_sd: _Optional[float] = ..., sums_resolution: _Optional[float] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., privacy_unit: _Optional[str] = ..., mechanism: _Optional[str] = ..., repeated: _Optional[bool] = ..., release_id: _Optional[str] = ..., epsilon_spent: _Optional[float] = ...) -> None: ...

class BoydRequest(_message.Message):
    __slots__ = ("session_id", "epsilon", "delta", "count_share", "reservation_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    COUNT_SHARE_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    epsilon: float
    delta: float
    count_share: float
    reservation_id: str
    def __init__(self, session_id: _Optional[str] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., count_share: _Optional[float] = ..., reservation_id: _Optional[str] = ...) -> None: ...

class BoydResponse(_message.Message):
    __slots__ = ("auc", "average_precision", "n1_noisy", "n", "epsilon", "delta", "count_share", "privacy_unit", "release_id", "repeated")
    AUC_FIELD_NUMBER: _ClassVar[int]
    AVERAGE_PRECISION_FIELD_NUMBER: _ClassVar[int]
    N1_NOISY_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    COUNT_SHARE_FIELD_NUMBER: _ClassVar[int]
    PRIVACY_UNIT_FIELD_NUMBER: _ClassVar[int]
    RELEASE_ID_FIELD_NUMBER: _ClassVar[int]
    REPEATED_FIELD_NUMBER: _ClassVar[int]
    auc: float
    average_precision: float
    n1_noisy: float
    n: int
    epsilon: float
    delta: float
    count_share: float
    privacy_unit: str
    release_id: str
    repeated: bool
    def __init__(self, auc: _Optional[float] = ..., average_precision: _Optional[float] = ..., n1_noisy: _Optional[float] = ..., n: _Optional[int] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., count_share: _Optional[float] = ..., privacy_unit: _Optional[str] = ..., release_id: _Optional[str] = ..., repeated: _Optional[bool] = ...) -> None: ...

class SecAggAdvertiseRequest(_message.Message):
    __slots__ = ("session_id", "round_id", "epsilon", "delta", "n_bins", "spacing", "sites", "colluders", "edges", "score_sums", "share_sigma", "next_round", "dropouts", "survival", "time_edges")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    N_BINS_FIELD_NUMBER: _ClassVar[int]
    SPACING_FIELD_NUMBER: _ClassVar[int]
    SITES_FIELD_NUMBER: _ClassVar[int]
    COLLUDERS_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    SCORE_SUMS_FIELD_NUMBER: _ClassVar[int]
    SHARE_SIGMA_FIELD_NUMBER: _ClassVar[int]
    NEXT_ROUND_FIELD_NUMBER: _ClassVar[int]
    DROPOUTS_FIELD_NUMBER: _ClassVar[int]
    SURVIVAL_FIELD_NUMBER: _ClassVar[int]
    TIME_EDGES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    round_id: bytes
    epsilon: float
    delta: float
    n_bins: int
    spacing: str
    sites: _containers.RepeatedScalarFieldContainer[str]
    colluders: int
    edges: _containers.RepeatedScalarFieldContainer[float]
    score_sums: bool
    share_sigma: float
    next_round: SecAggNextRound
    dropouts: int
    survival: bool
    time_edges: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, session_id: _Optional[str] = ..., round_id: _Optional[bytes] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., n_bins: _Optional[int] = ..., spacing: _Optional[str] = ..., sites: _Optional[_Iterable[str]] = ..., colluders: _Optional[int] = ..., edges: _Optional[_Iterable[float]] = ..., score_sums: _Optional[bool] = ..., share_sigma: _Optional[float] = ..., next_round: _Optional[_Union[SecAggNextRound, _Mapping]] = ..., dropouts: _Optional[int] = ..., survival: _Optional[bool] = ..., time_edges: _Optional[_Iterable[float]] = ...) -> None: ...

class SecAggNextRound(_message.Message):
    __slots__ = ("epsilon", "delta", "score_sums", "share_sigma")
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    SCORE_SUMS_FIELD_NUMBER: _ClassVar[int]
    SHARE_SIGMA_FIELD_NUMBER: _ClassVar[int]
    epsilon: float
    delta: float
    score_sums: bool
    share_sigma: float
    def __init__(self, epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., score_sums: _Optional[bool] = ..., share_sigma: _Optional[float] = ...) -> None: ...

class SecAggAdvertisement(_message.Message):
    __slots__ = ("site", "round_id", "request_sha256", "public_key", "signature", "edges", "share_sigma", "site_colluders", "sums_share_sigma", "time_edges")
    SITE_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_SHA256_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    SHARE_SIGMA_FIELD_NUMBER: _ClassVar[int]
    SITE_COLLUDERS_FIELD_NUMBER: _ClassVar[int]
    SUMS_SHARE_SIGMA_FIELD_NUMBER: _ClassVar[int]
    TIME_EDGES_FIELD_NUMBER: _ClassVar[int]
    site: str
    round_id: bytes
    request_sha256: str
    public_key: bytes
    signature: bytes
    edges: _containers.RepeatedScalarFieldContainer[float]
    share_sigma: float
    site_colluders: int
    sums_share_sigma: float
    time_edges: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, site: _Optional[str] = ..., round_id: _Optional[bytes] = ..., request_sha256: _Optional[str] = ..., public_key: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., edges: _Optional[_Iterable[float]] = ..., share_sigma: _Optional[float] = ..., site_colluders: _Optional[int] = ..., sums_share_sigma: _Optional[float] = ..., time_edges: _Optional[_Iterable[float]] = ...) -> None: ...

class SecAggMaskRequest(_message.Message):
    __slots__ = ("session_id", "round_id", "advertisements", "follow_up_reservation_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    ADVERTISEMENTS_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    round_id: bytes
    advertisements: _containers.RepeatedCompositeFieldContainer[SecAggAdvertisement]
    follow_up_reservation_id: str
    def __init__(self, session_id: _Optional[str] = ..., round_id: _Optional[bytes] = ..., advertisements: _Optional[_Iterable[_Union[SecAggAdvertisement, _Mapping]]] = ..., follow_up_reservation_id: _Optional[str] = ...) -> None: ...

class SecAggReceipt(_message.Message):
    __slots__ = ("site", "masked_sha256", "commitment", "signature")
    SITE_FIELD_NUMBER: _ClassVar[int]
    MASKED_SHA256_FIELD_NUMBER: _ClassVar[int]
    COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    site: str
    masked_sha256: str
    commitment: str
    signature: bytes
    def __init__(self, site: _Optional[str] = ..., masked_sha256: _Optional[str] = ..., commitment: _Optional[str] = ..., signature: _Optional[bytes] = ...) -> None: ...

class SecAggMaskResponse(_message.Message):
    __slots__ = ("masked", "receipt", "reservation_id", "follow_up_reservation_id")
    MASKED_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    masked: bytes
    receipt: SecAggReceipt
    reservation_id: str
    follow_up_reservation_id: str
    def __init__(self, masked: _Optional[bytes] = ..., receipt: _Optional[_Union[SecAggReceipt, _Mapping]] = ..., reservation_id: _Optional[str] = ..., follow_up_reservation_id: _Optional[str] = ...) -> None: ...

class SecAggUnmaskRequest(_message.Message):
    __slots__ = ("session_id", "round_id", "receipts", "confirmations")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    CONFIRMATIONS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    round_id: bytes
    receipts: _containers.RepeatedCompositeFieldContainer[SecAggReceipt]
    confirmations: _containers.RepeatedCompositeFieldContainer[SecAggConfirmation]
    def __init__(self, session_id: _Optional[str] = ..., round_id: _Optional[bytes] = ..., receipts: _Optional[_Iterable[_Union[SecAggReceipt, _Mapping]]] = ..., confirmations: _Optional[_Iterable[_Union[SecAggConfirmation, _Mapping]]] = ...) -> None: ...

class SecAggConfirmRequest(_message.Message):
    __slots__ = ("session_id", "round_id", "receipts")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    round_id: bytes
    receipts: _containers.RepeatedCompositeFieldContainer[SecAggReceipt]
    def __init__(self, session_id: _Optional[str] = ..., round_id: _Optional[bytes] = ..., receipts: _Optional[_Iterable[_Union[SecAggReceipt, _Mapping]]] = ...) -> None: ...

class SecAggConfirmation(_message.Message):
    __slots__ = ("site", "signature")
    SITE_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    site: str
    signature: bytes
    def __init__(self, site: _Optional[str] = ..., signature: _Optional[bytes] = ...) -> None: ...

class SecAggPairSeed(_message.Message):
    __slots__ = ("peer", "seed")
    PEER_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    peer: str
    seed: bytes
    def __init__(self, peer: _Optional[str] = ..., seed: _Optional[bytes] = ...) -> None: ...

class SecAggUnmaskResponse(_message.Message):
    __slots__ = ("self_seed", "release_id", "repeated", "epsilon_spent", "honest_shares", "privacy_unit", "pair_seeds")
    SELF_SEED_FIELD_NUMBER: _ClassVar[int]
    RELEASE_ID_FIELD_NUMBER: _ClassVar[int]
    REPEATED_FIELD_NUMBER: _ClassVar[int]
    EPSILON_SPENT_FIELD_NUMBER: _ClassVar[int]
    HONEST_SHARES_FIELD_NUMBER: _ClassVar[int]
    PRIVACY_UNIT_FIELD_NUMBER: _ClassVar[int]
    PAIR_SEEDS_FIELD_NUMBER: _ClassVar[int]
    self_seed: bytes
    release_id: str
    repeated: bool
    epsilon_spent: float
    honest_shares: int
    privacy_unit: str
    pair_seeds: _containers.RepeatedCompositeFieldContainer[SecAggPairSeed]
    def __init__(self, self_seed: _Optional[bytes] = ..., release_id: _Optional[str] = ..., repeated: _Optional[bool] = ..., epsilon_spent: _Optional[float] = ..., honest_shares: _Optional[int] = ..., privacy_unit: _Optional[str] = ..., pair_seeds: _Optional[_Iterable[_Union[SecAggPairSeed, _Mapping]]] = ...) -> None: ...
