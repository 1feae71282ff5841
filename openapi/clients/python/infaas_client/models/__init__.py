"""Contains all the data models used in inputs/outputs"""

from .api_key_view import ApiKeyView
from .app_detail import AppDetail
from .app_forecast import AppForecast
from .app_list import AppList
from .app_summary import AppSummary
from .cluster_status import ClusterStatus
from .combiner import Combiner
from .create_key_request import CreateKeyRequest
from .created_key import CreatedKey
from .datatype import Datatype
from .error_body import ErrorBody
from .file_list import FileList
from .file_view import FileView
from .gpu_view import GpuView
from .health import Health
from .infer_request import InferRequest
from .infer_response import InferResponse
from .instance_view import InstanceView
from .job_form import JobForm
from .job_list import JobList
from .job_request import JobRequest
from .job_view import JobView
from .key_list import KeyList
from .key_role import KeyRole
from .latency_view import LatencyView
from .leader_status import LeaderStatus
from .loading_view import LoadingView
from .me import Me
from .model_list import ModelList
from .model_task import ModelTask
from .model_view import ModelView
from .model_view_signature import ModelViewSignature
from .node_condition import NodeCondition
from .node_run_view import NodeRunView
from .node_spec import NodeSpec
from .node_spec_inputs import NodeSpecInputs
from .pipeline_infer_response import PipelineInferResponse
from .pipeline_infer_response_outputs_item import PipelineInferResponseOutputsItem
from .pipeline_input import PipelineInput
from .pipeline_input_datatype import PipelineInputDatatype
from .pipeline_list import PipelineList
from .pipeline_overload import PipelineOverload
from .pipeline_slo import PipelineSlo
from .pipeline_spec import PipelineSpec
from .pipeline_spec_outputs import PipelineSpecOutputs
from .pipeline_validation import PipelineValidation
from .pipeline_view import PipelineView
from .pipeline_view_status_type_0 import PipelineViewStatusType0
from .plan_body import PlanBody
from .plan_report import PlanReport
from .plan_report_tuner import PlanReportTuner
from .plan_trace import PlanTrace
from .planned_node import PlannedNode
from .pruned_variant_view import PrunedVariantView
from .quota_view import QuotaView
from .readiness import Readiness
from .recorded_trace import RecordedTrace
from .register_form import RegisterForm
from .replica_status import ReplicaStatus
from .scaling_event import ScalingEvent
from .scaling_events import ScalingEvents
from .tensor_json import TensorJson
from .token_request import TokenRequest
from .token_response import TokenResponse
from .trace_source_type_0 import TraceSourceType0
from .trace_source_type_1 import TraceSourceType1
from .trace_source_type_2 import TraceSourceType2
from .usage_minute import UsageMinute
from .usage_report import UsageReport
from .variant_view import VariantView
from .what_if_app_summary import WhatIfAppSummary
from .what_if_cluster import WhatIfCluster
from .what_if_point import WhatIfPoint
from .what_if_policy_name import WhatIfPolicyName
from .what_if_policy_result import WhatIfPolicyResult
from .what_if_policy_result_actions_by_kind import WhatIfPolicyResultActionsByKind
from .what_if_progress import WhatIfProgress
from .what_if_request import WhatIfRequest
from .what_if_run import WhatIfRun
from .what_if_run_list import WhatIfRunList
from .what_if_summary import WhatIfSummary
from .what_if_trace import WhatIfTrace
from .worker_list import WorkerList
from .worker_view import WorkerView

__all__ = (
    "ApiKeyView",
    "AppDetail",
    "AppForecast",
    "AppList",
    "AppSummary",
    "ClusterStatus",
    "Combiner",
    "CreatedKey",
    "CreateKeyRequest",
    "Datatype",
    "ErrorBody",
    "FileList",
    "FileView",
    "GpuView",
    "Health",
    "InferRequest",
    "InferResponse",
    "InstanceView",
    "JobForm",
    "JobList",
    "JobRequest",
    "JobView",
    "KeyList",
    "KeyRole",
    "LatencyView",
    "LeaderStatus",
    "LoadingView",
    "Me",
    "ModelList",
    "ModelTask",
    "ModelView",
    "ModelViewSignature",
    "NodeCondition",
    "NodeRunView",
    "NodeSpec",
    "NodeSpecInputs",
    "PipelineInferResponse",
    "PipelineInferResponseOutputsItem",
    "PipelineInput",
    "PipelineInputDatatype",
    "PipelineList",
    "PipelineOverload",
    "PipelineSlo",
    "PipelineSpec",
    "PipelineSpecOutputs",
    "PipelineValidation",
    "PipelineView",
    "PipelineViewStatusType0",
    "PlanBody",
    "PlannedNode",
    "PlanReport",
    "PlanReportTuner",
    "PlanTrace",
    "PrunedVariantView",
    "QuotaView",
    "Readiness",
    "RecordedTrace",
    "RegisterForm",
    "ReplicaStatus",
    "ScalingEvent",
    "ScalingEvents",
    "TensorJson",
    "TokenRequest",
    "TokenResponse",
    "TraceSourceType0",
    "TraceSourceType1",
    "TraceSourceType2",
    "UsageMinute",
    "UsageReport",
    "VariantView",
    "WhatIfAppSummary",
    "WhatIfCluster",
    "WhatIfPoint",
    "WhatIfPolicyName",
    "WhatIfPolicyResult",
    "WhatIfPolicyResultActionsByKind",
    "WhatIfProgress",
    "WhatIfRequest",
    "WhatIfRun",
    "WhatIfRunList",
    "WhatIfSummary",
    "WhatIfTrace",
    "WorkerList",
    "WorkerView",
)
